#include "ops/op_table.h"

#include <algorithm>
#include <iterator>
#include <type_traits>

#include "errors.h"
#include "ops/host_types.h"
#include "ops/host_unary_table.h"
#include "tileprim/elementwise/maps.cuh"
#include "tileprim/reduction/ops.cuh"

namespace tp {

namespace {

constexpr DType F16 = DType::float16, BF16 = DType::bfloat16, F32 = DType::float32, F64 = DType::float64,
                I32 = DType::int32, I64 = DType::int64;
const std::vector<DType> kFloats = {F16, BF16, F32, F64};
const std::vector<DType> kIndices = {I32, I64};
const std::vector<DType> k16 = {F16, BF16};  // where tileprim's transcendentals round once

// ---- the map functors on the host ---------------------------------------------------------
// Calls f with thread t's kArity mapped operands as the map template takes them: register
// bundles, or scalars broadcast to every slot.
template <int kArity, class T, class F, class... Done>
void with_operands(const HostMap& m, int t, F&& f, const Done&... done) {
  constexpr int i = sizeof...(Done);
  if constexpr (i == kArity) {
    f(done...);
  } else if (m.regs[i]) {
    const T* regs = static_cast<const T*>(m.regs[i]) + static_cast<long long>(t) * m.slots;
    with_operands<kArity, T>(m, t, f, done..., RegOperand<T>{regs});
  } else {
    with_operands<kArity, T>(m, t, f, done..., ScalarOperand<T>{convert_to<T>::from(m.scalar[i])});
  }
}

// The loop itself, where the vector clones must be: the compiler inlines nothing of another
// target into a clone, so a clone further out would call this loop's scalar build.
template <class Op, class TD, class... Operands>
TP_HOST_VECTOR_CLONES void map_slots(TD* dst, int slots, const Operands&... operands) {
  map_registers<Op, kUnrollMemory>(dst, slots, operands...);
}

// From this many elements a call looks a 16-bit one-operand map up (unary_table.h): the table
// costs 65536 evaluations once.
constexpr long long kTableWorthIt = 4096;

template <class Op, int kArity, class TD, class TS> void host_map_typed(const HostMap& m) {
  const long long n = static_cast<long long>(m.threads) * m.slots;  // threads' slots are consecutive
  if constexpr (kArity == 1 && sizeof(TD) == 2 && std::is_same_v<TD, TS>) {
    if (m.regs[0] && n >= kTableWorthIt) {
      const std::uint16_t* table = unary_table<Op, TD>([](TD* dst, const TD* src, int count) {
        map_slots<Op>(dst, count, RegOperand<TD>{src});
      });
      look_up(table, static_cast<TD*>(m.out), static_cast<const TD*>(m.regs[0]), n);
      return;
    }
  }
  for (int t = 0; t < m.threads; ++t) {
    TD* dst = static_cast<TD*>(m.out) + static_cast<long long>(t) * m.slots;
    with_operands<kArity, TS>(m, t, [&](const auto&... operands) { map_slots<Op>(dst, m.slots, operands...); });
  }
}

// kIndices: the op takes int32 and int64 tiles too
template <class Op, int kArity, bool kIndices = false> void host_map(const HostMap& m) {
  auto typed = [&](auto out_tag) {
    using TD = typename decltype(out_tag)::type;
    if constexpr (std::is_same_v<Op, map_op::Cast>) {  // only cast reads another dtype (an index type too)
      with_host_value(m.in_dtype,
                      [&](auto in_tag) { host_map_typed<Op, kArity, TD, typename decltype(in_tag)::type>(m); });
    } else {
      host_map_typed<Op, kArity, TD, TD>(m);
    }
  };
  if constexpr (kIndices) {
    with_host_value(m.out_dtype, typed);
  } else {
    with_host_float(m.out_dtype, typed);
  }
}

const char* const kSumIdentity = "-0.0 (x + -0.0 == x for every x)";
const char* const kIeeeNan = "IEEE: NaN propagates, inf - inf is NaN";
const char* const kSelectiveIdentity = "NaN (fmax/fmin's identity: a slice of only NaNs gives NaN)";
const char* const kSelectiveNan = "fmaxf/fminf: a NaN meeting a number yields the number (like np.fmax)";
const char* const kNanFormNan = ".NaN instruction forms: NaN propagates (like np.maximum)";

// An elementwise op whose functor reads the operands listed in `mapped`. Every map is one
// device function that both backends run, so every dtype gives the same bits on both; where it
// rounds once its error is half an ulp.
template <class Op, int kArity>
OpDef map(const std::string& name, std::vector<std::string> operands, std::vector<int> mapped,
          std::vector<DType> exact, const std::string& fn, const std::string& doc) {
  if (static_cast<int>(mapped.size()) != kArity) throw std::logic_error("op table: " + name + " maps " + std::to_string(kArity) + " operands");
  OpDef d{name, OpFamily::elementwise, std::move(operands), "", kFloats, NanRule::ieee, std::move(exact), {"fastmath"}, fn, "",
          "", "", std::move(mapped), &host_map<Op, kArity>, nullptr, doc};
  d.same_bits = kFloats;
  for (DType t : d.exactly_rounded) d.max_ulp.emplace_back(t, 0.5);
  return d;
}

// tileprim's own float32 and float64 algorithms (transcendental.cuh), their max error as
// `benchmarks/accuracy.py --exhaustive` measures it (float32: every input of the binades where
// the error is largest plus 2^21 samples; float64: 2^17.7 samples against mpmath), rounded up
// with a margin of 0.01 for the inputs not checked; float16 and bfloat16 round once, every input
// checked (benchmarks/results/accuracy.md). float64 exp, exp2, silu, sigmoid and erf state the bound of a result
// rounded twice into the subnormal range instead (hi rounded, then hi * 2^k to the subnormal grid:
// 0.75 ulp plus hi + lo's error): sampling found 0.745 for exp2 first, a later sample 0.765.
constexpr double kWideSubnormalUlp = 0.82;
OpDef measured(OpDef d, double f32_ulp, double f64_ulp) {
  d.max_ulp.emplace_back(F32, f32_ulp);
  d.max_ulp.emplace_back(F64, f64_ulp);
  return d;
}

// An op that takes int32 and int64 tiles too (cast reads them; a comparison or where also makes
// them): exact there, the same bits on every backend.
template <class Op, int kArity> OpDef with_indices(OpDef d) {
  d.dtypes.insert(d.dtypes.end(), kIndices.begin(), kIndices.end());
  d.exactly_rounded.insert(d.exactly_rounded.end(), kIndices.begin(), kIndices.end());
  d.same_bits = d.dtypes;
  for (DType t : kIndices) d.max_ulp.emplace_back(t, 0.5);
  d.host_map = &host_map<Op, kArity, true>;
  return d;
}

// An op that reads no values: its result depends only on the call, exactly.
OpDef valueless(OpDef d) {
  d.nan_rule = NanRule::none;
  for (auto& dtype_ulp : d.max_ulp) dtype_ulp.second = 0.0;
  return d;
}

// An op whose result is one of its operands or 0 or 1 rounds nothing: exact for every dtype.
OpDef rounds_nothing(OpDef d, NanRule rule) {
  d.nan_rule = rule;
  d.exactly_rounded = d.dtypes;
  d.max_ulp.clear();
  for (DType t : d.dtypes) d.max_ulp.emplace_back(t, 0.0);
  return d;
}
// eq, ne, lt, le, gt, ge: 1 or 0 in the operands' dtype (an index type too), a NaN comparing false
// (but for ne)
template <class Op> OpDef comparison(const std::string& name, const std::string& fn, const std::string& doc) {
  return rounds_nothing(with_indices<Op, 2>(map<Op, 2>(name, {"a", "b"}, {0, 1}, kFloats, fn, doc)), NanRule::compare);
}

// take_along_axis and scatter_add_along_axis: x's dtype out (the idx operand an index type, which
// the validation checks), through the gather family's variant; the CPU and every GPU give the same
// bits (take moves values, exactly; scatter sums in idx's order, as a reduction does).
OpDef gather(const std::string& name, std::vector<std::string> operands, bool sums, const std::string& fn,
             const std::string& doc) {
  OpDef d;  // by field: the table's fields grow
  d.name = name;
  d.family = OpFamily::gather;
  d.operands = std::move(operands);
  d.dtypes = kFloats;
  d.nan_rule = sums ? NanRule::ieee : NanRule::take;
  if (!sums) d.exactly_rounded = kFloats;
  d.device_fn = fn;
  d.doc = doc;
  d.same_bits = kFloats;
  if (!sums) {
    for (DType t : kFloats) d.max_ulp.emplace_back(t, 0.0);
  }
  return d;
}

// copy: values move unchanged (every dtype exact), through the restage family's variants.
OpDef restage(OpDef d) {
  d.family = OpFamily::restage;
  d.options.clear();
  d.nan_rule = NanRule::move;
  for (auto& [dtype, ulp] : d.max_ulp) ulp = 0;
  return d;
}

// fastmath=True's form of an op on the GPU (transcendental_fast.cuh): its functor, and what runs
// in words. float16 and bfloat16 compute it in float, rounded once, unless `sixteen_bit` says
// otherwise; float64 stays exact.
OpDef with_fast_form(OpDef d, const std::string& fn, const std::string& form,
                     const std::string& sixteen_bit = "in float, rounded once") {
  d.device_fn_fast = fn;
  d.fast_form = form + " (float16, bfloat16: " + sixteen_bit + "; float64: exact)";
  return d;
}

// fdiv: the same division where no numerator exceeds its divisor, which the GPU's division of a
// bundle by one value then need not check (maps.cuh); its fastmath form is a division by one value
// (a tile by a tile stays IEEE)
OpDef with_part_form(OpDef d, const std::string& fn_part) {
  d.device_fn_part = fn_part;
  d.fast_by_one_value = 1;
  return d;
}

// An op an exact program's chain rounded to 16 bits may estimate on the GPU (ChainRole)
OpDef in_chains(OpDef d, ChainRole role) {
  d.chain_role = role;
  return d;
}

// maximum: fmaxf's NaN rule, with the .NaN form behind propagate_nan=True.
OpDef with_nan_form(OpDef d, const std::string& fn_nan, HostMapFn host_nan) {
  d.nan_rule = NanRule::fmax;
  d.options.push_back("propagate_nan");
  d.device_fn_nan = fn_nan;
  d.host_map_nan = host_nan;
  return d;
}

std::vector<OpDef> build_table() {
  OpDef cast = with_indices<map_op::Cast, 1>(map<map_op::Cast, 1>(
      "cast", {"src"}, {0}, kFloats, "tp::map_op::Cast",
      "src rounded to dtype, a float dtype (nearest even; an int32 or int64 src too)"));
  cast.extra_arg = "dtype";
  cast.chain_role = ChainRole::widening;
  const OpDef treduce{"treduce", OpFamily::collective, {}, "", {F32, F16, BF16, I32}, NanRule::collective, {F32, F16, BF16, I32},
                      {}, "", "", "", "", {}, nullptr, nullptr,
                      "every rank's tensor reduced into the root's dst: the root's value, then ranks ascending"};
  std::vector<OpDef> table = {
      reduction_entry<reduce_op::Sum>("sum", {ReductionKind::sum, kSumIdentity, "", kIeeeNan, ""}, "the sum over axes"),
      reduction_entry<reduce_op::Max, reduce_op::MaxNaN>(
          "max", {ReductionKind::max, kSelectiveIdentity, "-inf", kSelectiveNan, kNanFormNan}, "the maximum over axes"),
      reduction_entry<reduce_op::Min, reduce_op::MinNaN>(
          "min", {ReductionKind::min, kSelectiveIdentity, "+inf", kSelectiveNan, kNanFormNan}, "the minimum over axes"),
      valueless(map<map_op::Zero, 0>("zero", {"src"}, {}, kFloats, "tp::map_op::Zero", "a tile of +0 shaped like src")),
      valueless(map<map_op::Copy, 1>("fill", {"src", "value"}, {1}, kFloats, "tp::map_op::Copy",
                                  "a tile shaped like src with every element value")),
      map<map_op::Reciprocal, 1>("reciprocal", {"src"}, {0}, kFloats, "tp::map_op::Reciprocal", "1 / src"),
      map<map_op::Sqrt, 1>("sqrt", {"src"}, {0}, kFloats, "tp::map_op::Sqrt", "the square root of src"),
      // float32 exp is faithful (every float32 input checked: 0.8954 at most)
      in_chains(with_fast_form(measured(map<map_op::Exp, 1>("exp", {"src"}, {0}, k16, "tp::map_op::Exp", "e ** src"), 0.90,
                              kWideSubnormalUlp),
                     "tp::map_op::FastExp", "ex2.approx.ftz.f32 of src * log2(e): results below 2^-126 are 0"), ChainRole::estimated),
      in_chains(with_fast_form(measured(map<map_op::Exp2, 1>("exp2", {"src"}, {0}, k16, "tp::map_op::Exp2", "2 ** src"), 0.80,
                              kWideSubnormalUlp),
                     "tp::map_op::FastExp2", "ex2.approx.ftz.f32: results below 2^-126 are 0"), ChainRole::estimated),
      with_fast_form(measured(map<map_op::Log2, 1>("log2", {"src"}, {0}, k16, "tp::map_op::Log2",
                                              "the base-2 logarithm of src"), 0.75, 0.67),
                     "tp::map_op::FastLog2", "lg2.approx.f32: an absolute error, so large in ulps near src = 1"),
      with_fast_form(measured(map<map_op::Log, 1>("log", {"src"}, {0}, k16, "tp::map_op::Log",
                                              "the natural logarithm of src"), 0.69, 0.63),
                     "tp::map_op::FastLog", "lg2.approx.f32 times ln(2): an absolute error, so large in ulps near src = 1"),
      with_fast_form(measured(map<map_op::Rsqrt, 1>("rsqrt", {"src"}, {0}, k16, "tp::map_op::Rsqrt", "1 / sqrt(src)"),
                              0.52, 0.51),
                     "tp::map_op::FastRsqrt", "rsqrt.approx.f32"),
      in_chains(with_fast_form(measured(map<map_op::Silu, 1>("silu", {"src"}, {0}, k16, "tp::map_op::Silu",
                                                   "src * sigmoid(src) = src / (1 + exp(-src)), finite wherever the result is"),
                              0.82, kWideSubnormalUlp),
                     "tp::map_op::FastSilu",
                     "src * sigmoid(src), sigmoid as fastmath's (rcp.approx.ftz.f32 of 1 + ex2.approx.ftz.f32 of -src "
                     "log2(e)): -0 below src = -87.3, where sigmoid's result flushes to 0"), ChainRole::estimated),
      with_fast_form(measured(map<map_op::Tanh, 1>("tanh", {"src"}, {0}, k16, "tp::map_op::Tanh",
                                                   "the hyperbolic tangent of src"),
                              0.78, 0.83),  // float64: 0.80 at src ~ 0.17 (12M samples); 0.69 was too few
                     "tp::map_op::FastTanh",
                     "tanh.approx.f32: the PTX ISA bounds its relative error by 2^-11 (measured near 2^-16.5)",
                     "tanh.approx.f16 (sm_75 on) and tanh.approx.bf16 (sm_90 on), else in float, rounded once"),
      measured(map<map_op::Erf, 1>("erf", {"src"}, {0}, k16, "tp::map_op::Erf", "the error function of src"), 0.77,
               kWideSubnormalUlp),
      in_chains(with_fast_form(measured(map<map_op::Sigmoid, 1>("sigmoid", {"src"}, {0}, k16, "tp::map_op::Sigmoid",
                                                      "1 / (1 + exp(-src)), finite wherever the result is"),
                              0.78, kWideSubnormalUlp),
                     "tp::map_op::FastSigmoid",
                     "rcp.approx.ftz.f32 of 1 + ex2.approx.ftz.f32 of -src log2(e): results below 2^-126 (src "
                     "below -87.3) are 0"), ChainRole::estimated),
      map<map_op::Add, 2>("add", {"a", "b"}, {0, 1}, kFloats, "tp::map_op::Add", "a + b"),
      map<map_op::Sub, 2>("sub", {"a", "b"}, {0, 1}, kFloats, "tp::map_op::Sub", "a - b"),
      in_chains(map<map_op::Mul, 2>("mul", {"a", "b"}, {0, 1}, kFloats, "tp::map_op::Mul", "a * b"), ChainRole::product),
      in_chains(with_part_form(with_fast_form(map<map_op::Fdiv, 2>("fdiv", {"a", "b"}, {0, 1}, kFloats, "tp::map_op::Fdiv",
                                                        "a / b (IEEE division)"),
                                    "tp::map_op::FastFdiv",
                                    "where b is one value for the tile (a scalar, or a row's sum broadcast): a times "
                                    "1 / b, the reciprocal rounded once; other divisions IEEE"),
                     "tp::map_op::FdivOfPart"), ChainRole::product),
      with_nan_form(map<map_op::Maximum, 2>("maximum", {"a", "b"}, {0, 1}, kFloats, "tp::map_op::Maximum",
                                         "the larger of a and b; NaN loses (np.fmax) unless propagate_nan=True"),
                    "tp::map_op::MaximumNaN", &host_map<map_op::MaximumNaN, 2>),
      comparison<map_op::Eq>("eq", "tp::map_op::Eq", "1 where a == b, else 0, in the operands' dtype (NaN: 0)"),
      comparison<map_op::Ne>("ne", "tp::map_op::Ne", "1 where a != b, else 0 (NaN differs from everything)"),
      comparison<map_op::Lt>("lt", "tp::map_op::Lt", "1 where a < b, else 0 (0 where either is NaN)"),
      comparison<map_op::Le>("le", "tp::map_op::Le", "1 where a <= b, else 0 (0 where either is NaN)"),
      comparison<map_op::Gt>("gt", "tp::map_op::Gt", "1 where a > b, else 0 (0 where either is NaN)"),
      comparison<map_op::Ge>("ge", "tp::map_op::Ge", "1 where a >= b, else 0 (0 where either is NaN)"),
      rounds_nothing(with_indices<map_op::Where, 3>(map<map_op::Where, 3>(
                         "where", {"cond", "a", "b"}, {0, 1, 2}, kFloats, "tp::map_op::Where",
                         "a where cond != 0, else b (a NaN cond is nonzero)")),
                     NanRule::select),
      map<map_op::Fma, 3>("fma", {"a", "b", "c"}, {0, 1, 2}, kFloats, "tp::map_op::Fma", "a * b + c, rounded once"),
      cast,
      gather("take_along_axis", {"x", "idx"}, false, "tp::take_along_axis",
             "x at the positions idx (int32 or int64) gives along axis, NumPy's take_along_axis; NaN where an index "
             "lies outside [-n, n)"),
      gather("scatter_add_along_axis", {"x", "idx", "src"}, true, "tp::scatter_add_along_axis",
             "a tile of +0 shaped like x (only its shape is read) with src added at the positions idx gives along "
             "axis, in idx's order: take_along_axis's derivative"),
      restage(with_indices<map_op::Copy, 1>(map<map_op::Copy, 1>(
          "copy", {"src"}, {0}, kFloats, "tp::map_op::Copy", "src restaged: the same values in another storage or layout"))),
      treduce,
  };
  // A copy moves values unchanged; a reduction folds in the one order both backends' templates share; treduce folds the root,
  // then ranks ascending: the same bits on the CPU and every GPU for each dtype.
  for (OpDef& d : table) {
    if (d.family != OpFamily::elementwise) d.same_bits = d.dtypes;
  }
  return table;
}

}  // namespace

const char* family_name(OpFamily f) {
  switch (f) {
    case OpFamily::reduction: return "reduction";
    case OpFamily::elementwise: return "elementwise";
    case OpFamily::restage: return "restage";
    case OpFamily::gather: return "gather";
    case OpFamily::collective: return "collective";
  }
  return "?";
}

const char* nan_rule_text(NanRule r) {
  switch (r) {
    case NanRule::ieee: return "ieee: NaN propagates";
    case NanRule::fmax:
      return "fmax / fmin: a NaN meeting a number yields the number; propagate_nan=True propagates it";
    case NanRule::none: return "none: reads no values";
    case NanRule::compare: return "compare: a NaN compares false (0), but for ne (1)";
    case NanRule::select: return "select: values move unchanged (where counts a NaN cond as nonzero)";
    case NanRule::take: return "take: values move unchanged; NaN where an index lies outside [-n, n)";
    case NanRule::move: return "move: values move unchanged, NaN payloads too";
    case NanRule::collective:
      return "op='sum': IEEE, NaN propagates; op='max' / 'min': fmax / fmin, a NaN meeting a number yields the "
             "number (treduce has no propagate_nan option)";
  }
  return "?";
}

const std::string& OpDef::functor(bool propagate_nan, bool fastmath, DType dtype, bool part_of_divisor) const {
  if (propagate_nan && !device_fn_nan.empty()) return device_fn_nan;
  if (approximated(fastmath, dtype)) return device_fn_fast;
  return part_of_divisor && !device_fn_part.empty() ? device_fn_part : device_fn;
}

bool OpDef::approximated(bool fastmath, DType dtype) const {
  return fastmath && !device_fn_fast.empty() && dtype != DType::float64;
}

bool OpDef::takes(DType t) const { return std::find(dtypes.begin(), dtypes.end(), t) != dtypes.end(); }
bool OpDef::exact_for(DType t) const {
  return std::find(exactly_rounded.begin(), exactly_rounded.end(), t) != exactly_rounded.end();
}
bool OpDef::has_option(const std::string& key) const {
  return std::find(options.begin(), options.end(), key) != options.end();
}

namespace {

std::deque<OpDef>& mutable_table() {
  static std::deque<OpDef> table = [] {
    std::vector<OpDef> built = build_table();
    return std::deque<OpDef>(std::make_move_iterator(built.begin()), std::make_move_iterator(built.end()));
  }();
  return table;
}

const OpDef* find_op(const std::string& name) {
  for (const OpDef& d : op_table()) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

}  // namespace

const std::deque<OpDef>& op_table() { return mutable_table(); }

const OpDef& op_def(const std::string& name) {
  if (const OpDef* d = find_op(name)) return *d;
  std::string names;
  for (const OpDef& d : op_table()) names += (names.empty() ? "" : ", ") + d.name;
  throw ValueError("op: '" + name + "' is not a tileprim op; the ops are " + names);
}

std::string reduction_op_names() {
  std::vector<std::string> names;
  for (const OpDef& d : op_table()) {
    if (d.reduction) names.push_back("'" + d.name + "'");
  }
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

void register_op(OpDef def) {
  if (find_op(def.name)) throw ValueError("op: '" + def.name + "' is already an op");
  mutable_table().push_back(std::move(def));
}

void unregister_op(const std::string& name) {
  std::deque<OpDef>& table = mutable_table();
  if (table.empty() || table.back().name != name) throw ValueError("op: '" + name + "' was not the last op registered");
  table.pop_back();  // the others stay where they are
}

}  // namespace tp
