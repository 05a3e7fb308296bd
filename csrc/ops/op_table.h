// The op table: every op of tileprim once. Python's op functions and scope methods,
// tp.variants, validation, both backends and the tests read it (tileprim._C.ops()).
// Adding an elementwise op is one entry in op_table.cc plus its functor in
// include/tileprim/elementwise/maps.cuh.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ops/dtype.h"

namespace tp {

enum class OpFamily { reduction, elementwise, collective };
const char* family_name(OpFamily f);

// How an op treats NaN.
enum class NanRule {
  ieee,  // NaN in, NaN out (add, sqrt, ...)
  fmax,  // a NaN meeting a number yields the number (fmaxf); propagate_nan=True opts into NaN out
  none,  // reads no values (zero, fill)
};
const char* nan_rule_text(NanRule r);

// What the CPU backend needs to run a map on register bundles: the output and operand
// dtypes, `threads` bundles of `slots` registers each ([thread][slot]), and per mapped
// operand its registers (laid out like the output) or its scalar value.
struct HostMap {
  DType in_dtype, out_dtype;
  int threads = 1, slots = 1;
  void* out = nullptr;
  const void* regs[3] = {nullptr, nullptr, nullptr};
  double scalar[3] = {0, 0, 0};
  int operands = 0;
};
using HostMapFn = void (*)(const HostMap& m);

struct OpDef {
  std::string name;
  OpFamily family;
  std::vector<std::string> operands;  // argument names; empty for a collective (one per rank)
  std::string extra_arg;              // a further positional argument ("dtype" for cast)
  std::vector<DType> dtypes;          // operand dtypes it takes
  NanRule nan_rule = NanRule::ieee;
  std::vector<DType> exactly_rounded;  // dtypes where it rounds once on every backend (CPU = GPU)
  std::vector<std::string> options;    // the **config switches it reads (each a bool)
  std::string device_fn;               // its functor in the device headers
  std::string device_fn_nan;           // ... with propagate_nan=True
  std::vector<int> mapped;             // elementwise: the operands the functor reads
  HostMapFn host_map = nullptr;        // elementwise: the functor on the CPU
  HostMapFn host_map_nan = nullptr;
  std::string doc;                     // one line
  std::vector<DType> same_bits;        // dtypes where the CPU and every GPU give the same bits
  // measured max error in ulps against the correctly rounded result, per dtype (elementwise;
  // benchmarks/accuracy.py measures them): 0.5 where it rounds once, 0 where exact
  std::vector<std::pair<DType, double>> max_ulp;

  int arity() const { return static_cast<int>(operands.size()); }
  bool takes(DType t) const;
  bool exact_for(DType t) const;
  bool has_option(const std::string& key) const;
};

const std::vector<OpDef>& op_table();
const OpDef& op_def(const std::string& name);  // ValueError naming the ops for an unknown name

}  // namespace tp
