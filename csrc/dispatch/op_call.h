// OpCall: one call of a tile primitive as dispatch sees it: the op, its operand tiles (dtype,
// shape, storage scope, layout), the exec scope, the op's attributes and **config.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "dispatch/dtype.h"
#include "layout/exec_scope.h"
#include "layout/tile_layout.h"

namespace tp {

enum class Storage { local, shared, shared_dyn, global };
const char* storage_name(Storage s);  // "local", "shared", "shared.dyn", "global"
Storage storage_from_name(const std::string& name);  // ValueError naming `storage`
inline bool is_shared(Storage s) { return s == Storage::shared || s == Storage::shared_dyn; }

enum class OpFamily { reduction, elementwise };
struct OpInfo {
  std::string name;
  OpFamily family;
  int operands;  // array-or-scalar inputs
};
const OpInfo& op_info(const std::string& op);  // ValueError for an unknown op
const std::vector<OpInfo>& all_ops();

// One operand (or the result) of a call.
struct TileRef {
  std::string arg;  // its name in messages: src, a, b, c, value, out
  DType dtype = DType::float32;
  std::vector<long long> shape;  // the tile's logical shape
  Storage storage = Storage::local;
  std::optional<TileLayout> layout;  // unset: the variant's default
  bool scalar = false;               // a Python scalar operand (elementwise)
  double value = 0.0;

  long long elements() const;
  std::string str() const;  // "float32[4, 8] local S[(4, 8) : (8, 1)]"
};

using ConfigValue = std::variant<bool, long long, double, std::string>;

struct OpCall {
  std::string op;
  std::vector<TileRef> inputs;
  TileRef output;
  ExecScope scope;
  std::vector<int> axes;  // reductions: normalised to 0..rank-1, ascending, unique
  bool accum = false;
  std::map<std::string, ConfigValue> config;
  std::string dispatch;  // a forced variant name, or empty

  const OpInfo& info() const { return op_info(op); }
  bool flag(const std::string& key) const;  // a bool option of **config, default false
  std::string str() const;  // "tp.sum(src=float32[4] local S[4 : 1], axes=(0,), scope=thread)"
};

}  // namespace tp
