// The op table: every op of tileprim once. Python's op functions and scope methods,
// tp.variants, validation, both backends and the tests read it (tileprim._C.ops()).
// Adding an elementwise op is one entry in op_table.cc plus its functor in
// include/tileprim/elementwise/maps.cuh; a reduction op, one entry plus its functors in
// include/tileprim/reduction/ops.cuh, listed in ops/reduce_functors.h.
#pragma once
#include <deque>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/dtype.h"

namespace tp {

// restage: a tile moved unchanged between placements (copy), served by its own variants; gather:
// a tile indexed along an axis by an index tile's values (take_along_axis and its derivative)
enum class OpFamily { reduction, elementwise, restage, gather, collective };
const char* family_name(OpFamily f);

// How an op treats NaN.
enum class NanRule {
  ieee,  // NaN in, NaN out (add, sqrt, ...)
  fmax,  // a NaN meeting a number yields the number (fmaxf); propagate_nan=True opts into NaN out
  none,  // reads no values (zero, fill)
  compare,  // a NaN compares false (eq, lt, le, gt, ge: 0 where either operand is NaN; ne: 1)
  select,   // moves a value unchanged, NaN too; a NaN condition is nonzero (where)
  take,     // moves x's value unchanged, NaN too; NaN where an index lies outside the row (take_along_axis)
  move,     // moves the value unchanged, NaN payloads too (copy)
  collective,  // treduce: sum as IEEE, max / min as fmax / fmin with no propagate_nan option
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

// What a reduction op computes, for the variants that specialise on it (sm100_packed's packed
// adds and 3-input max/min); `other` for any further op, which the generic variants serve.
enum class ReductionKind { sum, max, min, other };

// A reduction op's descriptor. Its functors are the OpDef's device_fn (device_fn_nan with
// propagate_nan=True): the kernels name them, and the CPU backend runs the same types
// (ops/reduce_functors.h). The texts are what its plans note.
struct ReductionOp {
  ReductionKind kind = ReductionKind::other;
  std::string identity;      // the fold's start
  std::string identity_nan;  // ... with propagate_nan=True
  std::string nan;           // how a NaN goes through the fold
  std::string nan_nan;       // ... with propagate_nan=True
};

// How an exact program's float32 chain rounded to 16 bits may estimate an op on the GPU
// (include/tileprim/elementwise/estimated.cuh; backends/cuda/estimated_chain.cc finds the chains)
enum class ChainRole {
  none,
  estimated,  // its fast form, within the bound tp::Estimated<its functor> states
  product,    // a product or quotient: its relative error is its operands' plus one rounding
  widening,   // cast: a 16-bit float widened to float32 is exact (the check and the rare path widen
              // the 16-bit value again, so that no float copy of it stays live)
};

struct OpDef {
  std::string name;
  OpFamily family = OpFamily::elementwise;
  std::vector<std::string> operands;  // argument names; empty for a collective (one per rank)
  std::string extra_arg;              // a further positional argument ("dtype" for cast)
  std::vector<DType> dtypes;          // operand dtypes it takes
  NanRule nan_rule = NanRule::ieee;
  std::vector<DType> exactly_rounded;  // dtypes where it rounds once on every backend (CPU = GPU)
  std::vector<std::string> options;    // the **config switches it reads (each a bool)
  std::string device_fn;               // its functor in the device headers
  std::string device_fn_nan;           // ... with propagate_nan=True
  // fastmath=True (elementwise): the functor with the GPU's approximations and what they are, in
  // words; empty where the op has none (it runs exactly as without fastmath)
  std::string device_fn_fast;
  std::string fast_form;
  std::vector<int> mapped;             // elementwise: the operands the functor reads
  HostMapFn host_map = nullptr;        // elementwise: the functor on the CPU
  HostMapFn host_map_nan = nullptr;
  std::string doc;                     // one line
  std::optional<ReductionOp> reduction;  // reductions: the descriptor every variant and backend reads
  std::vector<DType> same_bits;        // dtypes where the CPU and every GPU give the same bits
  // measured max error in ulps against the correctly rounded result, per dtype (elementwise;
  // benchmarks/accuracy.py measures them): 0.5 where it rounds once, 0 where exact
  std::vector<std::pair<DType, double>> max_ulp;
  // the exact functor where the call's numerator is a nonnegative part of its one-valued divisor
  // (OpCall::numerator_part_of_divisor: a softmax's division), empty where the op has none
  std::string device_fn_part;
  ChainRole chain_role = ChainRole::none;
  int fast_by_one_value = -1;  // the operand a fastmath form needs as one value for the tile (fdiv's b), or -1

  int arity() const { return static_cast<int>(operands.size()); }
  // The device functor a call with this result dtype runs: with propagate_nan=True its NaN form,
  // with fastmath=True its fast form where it has one for the dtype, else its part-of-divisor form
  // where the numerator is a part of the divisor and it has one, else device_fn.
  const std::string& functor(bool propagate_nan, bool fastmath, DType dtype, bool part_of_divisor = false) const;
  // fastmath=True changes what runs on a GPU for this dtype (float64 has no approximation).
  bool approximated(bool fastmath, DType dtype) const;
  bool takes(DType t) const;
  bool exact_for(DType t) const;
  bool has_option(const std::string& key) const;
};

// A deque: registering an op leaves every OpDef& handed out (OpCall::def) in place.
// A reduction op's table entry over functor Op (reduction/ops.cuh), with the NaN-propagating
// form OpNaN where it has one (void: none; then it reads no propagate_nan).
template <class Op, class OpNaN = void>
OpDef reduction_entry(const std::string& name, ReductionOp desc, const std::string& doc) {
  constexpr bool nan_form = !std::is_void_v<OpNaN>;
  const std::vector<DType> floats = {DType::float16, DType::bfloat16, DType::float32, DType::float64};
  OpDef d;
  d.name = name;
  d.family = OpFamily::reduction;
  d.operands = {"src"};
  d.dtypes = d.exactly_rounded = floats;
  d.nan_rule = nan_form ? NanRule::fmax : NanRule::ieee;
  d.options = {"thread_reduce"};
  if (nan_form) d.options.push_back("propagate_nan");
  d.device_fn = Op::kName;
  if constexpr (nan_form) d.device_fn_nan = OpNaN::kName;
  d.doc = doc;
  d.reduction = std::move(desc);
  return d;
}

const std::deque<OpDef>& op_table();
const OpDef& op_def(const std::string& name);  // ValueError naming the ops for an unknown name
// The reduction ops' names, quoted: "'sum', 'max' or 'min'".
std::string reduction_op_names();

// Test support: adds an op to the table (ValueError when the name is taken) and takes the
// last added one away again; the caller drops every plan that names it.
void register_op(OpDef def);
void unregister_op(const std::string& name);

}  // namespace tp
