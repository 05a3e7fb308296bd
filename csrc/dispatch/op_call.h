// OpCall: one call of a primitive as dispatch sees it: the op, its operands (dtype, shape,
// storage scope, layout; for collectives also device and strides), the exec scope, the op's
// attributes and **config (treduce: its TreduceOptions). key() is its canonical text: equal
// keys plan alike.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "dispatch/treduce_options.h"
#include "layout/exec_scope.h"
#include "layout/tile_layout.h"
#include "ops/op_table.h"

namespace tp {

enum class Storage { local, shared, shared_dyn, global };
const char* storage_name(Storage s);  // "local", "shared", "shared.dyn", "global"
const std::vector<Storage>& storages();  // every storage, in that order
Storage storage_from_name(const std::string& name);  // ValueError naming `storage`
inline bool is_shared(Storage s) { return s == Storage::shared || s == Storage::shared_dyn; }

// One operand (or the result) of a call.
struct TileRef {
  std::string arg;  // its name in messages: src, a, b, c, value, out, or a rank's "tensors[r]"
  DType dtype = DType::float32;
  std::vector<long long> shape;  // the tile's logical shape (a collective's whole tensor)
  Storage storage = Storage::local;
  std::optional<TileLayout> layout;  // unset: the variant's default
  bool scalar = false;               // a Python scalar operand (elementwise); its value is run-time
  int device = -1;                   // collectives: the CUDA device holding it, -1 for host memory
  std::vector<long long> strides;    // collectives: element strides of the tensor

  long long elements() const;
  std::string str() const;  // "float32[4, 8] local S[(4, 8) : (8, 1)]"
};

using ConfigValue = std::variant<bool, long long, double, std::string>;
std::string config_str(const ConfigValue& v);  // Python's spelling: True, 3, 'sum'

struct OpCall {
  const OpDef* def = nullptr;  // from the op table
  std::vector<TileRef> inputs;
  TileRef output;
  ExecScope scope;
  std::vector<int> axes;  // reductions: normalised to 0..rank-1, ascending, unique
  bool accum = false;
  std::map<std::string, ConfigValue> config;
  std::optional<TreduceOptions> treduce;  // treduce's options (the collective family); unset for the others
  std::string dispatch;  // a forced variant name, or empty
  // fdiv in a program whose numerator is a nonnegative tile and whose divisor that tile's own sum
  // (program_plan.cc): no quotient's numerator exceeds its divisor, which the GPU's division of a
  // bundle by one value then need not check (maps.cuh, FdivOfPart)
  bool numerator_part_of_divisor = false;

  const std::string& op() const { return def->name; }
  bool flag(const std::string& key) const;  // a bool option of **config, default false
  long long integer(const std::string& key, long long fallback) const;
  std::string text(const std::string& key, const std::string& fallback) const;
  std::string str() const;  // "tp.sum(src=float32[4] local S[4 : 1], axes=(0,), scope=thread)"
  std::string key() const;  // str() plus what str() leaves out (devices, strides)
};

}  // namespace tp
