#include "ops/op_table.h"

#include <algorithm>
#include <type_traits>

#include "errors.h"
#include "ops/host_types.h"
#include "ops/host_unary_table.h"
#include "tileprim/elementwise/maps.cuh"

namespace tp {

namespace {

constexpr DType F16 = DType::float16, BF16 = DType::bfloat16, F32 = DType::float32, F64 = DType::float64,
                I32 = DType::int32;
const std::vector<DType> kFloats = {F16, BF16, F32, F64};
const std::vector<DType> kWide = {F32, F64};  // where CUDA's sqrt, division and reciprocal round once

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

template <class Op, int kArity> void host_map(const HostMap& m) {
  with_host_float(m.out_dtype, [&](auto out_tag) {
    using TD = typename decltype(out_tag)::type;
    if constexpr (std::is_same_v<Op, map_op::Cast>) {  // only cast reads another dtype
      with_host_float(m.in_dtype, [&](auto in_tag) { host_map_typed<Op, kArity, TD, typename decltype(in_tag)::type>(m); });
    } else {
      host_map_typed<Op, kArity, TD, TD>(m);
    }
  });
}

OpDef reduction(const std::string& name, NanRule nan, std::vector<std::string> options, const std::string& fn,
                const std::string& fn_nan, const std::string& doc) {
  return OpDef{name, OpFamily::reduction, {"src"}, "", kFloats, nan, kFloats, std::move(options), fn, fn_nan, {},
               nullptr, nullptr, doc};
}

// An elementwise op whose functor reads the operands listed in `mapped`.
template <class Op, int kArity>
OpDef map(const std::string& name, std::vector<std::string> operands, std::vector<int> mapped,
          std::vector<DType> exact, const std::string& fn, const std::string& doc) {
  if (static_cast<int>(mapped.size()) != kArity) throw std::logic_error("op table: " + name + " maps " + std::to_string(kArity) + " operands");
  return OpDef{name, OpFamily::elementwise, std::move(operands), "", kFloats, NanRule::ieee, std::move(exact), {}, fn, "",
               std::move(mapped), &host_map<Op, kArity>, nullptr, doc};
}

// An op that reads no values: its result depends only on the call.
OpDef valueless(OpDef d) {
  d.nan_rule = NanRule::none;
  return d;
}

// maximum: fmaxf's NaN rule, with the .NaN form behind propagate_nan=True.
OpDef with_nan_form(OpDef d, const std::string& fn_nan, HostMapFn host_nan) {
  d.nan_rule = NanRule::fmax;
  d.options = {"propagate_nan"};
  d.device_fn_nan = fn_nan;
  d.host_map_nan = host_nan;
  return d;
}

std::vector<OpDef> build_table() {
  OpDef cast = map<map_op::Cast, 1>("cast", {"src"}, {0}, kFloats, "tp::map_op::Cast", "src rounded to dtype (nearest even)");
  cast.extra_arg = "dtype";
  const OpDef treduce{"treduce", OpFamily::collective, {}, "", {F32, F16, BF16, I32}, NanRule::fmax, {F32, F16, BF16, I32},
                      {}, "", "", {}, nullptr, nullptr,
                      "every rank's tensor reduced into the root's dst: the root's value, then ranks ascending"};
  return {
      reduction("sum", NanRule::ieee, {"thread_reduce"}, "tp::reduce_op::Sum", "", "the sum over axes"),
      reduction("max", NanRule::fmax, {"thread_reduce", "propagate_nan"}, "tp::reduce_op::Max",
                "tp::reduce_op::MaxNaN", "the maximum over axes"),
      reduction("min", NanRule::fmax, {"thread_reduce", "propagate_nan"}, "tp::reduce_op::Min",
                "tp::reduce_op::MinNaN", "the minimum over axes"),
      valueless(map<map_op::Zero, 0>("zero", {"src"}, {}, kFloats, "tp::map_op::Zero", "a tile of +0 shaped like src")),
      valueless(map<map_op::Copy, 1>("fill", {"src", "value"}, {1}, kFloats, "tp::map_op::Copy",
                                  "a tile shaped like src with every element value")),
      map<map_op::Reciprocal, 1>("reciprocal", {"src"}, {0}, kWide, "tp::map_op::Reciprocal", "1 / src"),
      map<map_op::Sqrt, 1>("sqrt", {"src"}, {0}, kWide, "tp::map_op::Sqrt", "the square root of src"),
      map<map_op::Exp, 1>("exp", {"src"}, {0}, {}, "tp::map_op::Exp", "e ** src"),
      map<map_op::Exp2, 1>("exp2", {"src"}, {0}, {}, "tp::map_op::Exp2", "2 ** src"),
      map<map_op::Log2, 1>("log2", {"src"}, {0}, {}, "tp::map_op::Log2", "the base-2 logarithm of src"),
      map<map_op::Log, 1>("log", {"src"}, {0}, {}, "tp::map_op::Log", "the natural logarithm of src"),
      map<map_op::Rsqrt, 1>("rsqrt", {"src"}, {0}, {}, "tp::map_op::Rsqrt", "1 / sqrt(src)"),
      map<map_op::Silu, 1>("silu", {"src"}, {0}, {}, "tp::map_op::Silu",
                        "src / (1 + exp(-src)), each step rounded to the dtype"),
      map<map_op::Add, 2>("add", {"a", "b"}, {0, 1}, kFloats, "tp::map_op::Add", "a + b"),
      map<map_op::Sub, 2>("sub", {"a", "b"}, {0, 1}, kFloats, "tp::map_op::Sub", "a - b"),
      map<map_op::Mul, 2>("mul", {"a", "b"}, {0, 1}, kFloats, "tp::map_op::Mul", "a * b"),
      map<map_op::Fdiv, 2>("fdiv", {"a", "b"}, {0, 1}, kWide, "tp::map_op::Fdiv", "a / b (IEEE division)"),
      with_nan_form(map<map_op::Maximum, 2>("maximum", {"a", "b"}, {0, 1}, kFloats, "tp::map_op::Maximum",
                                         "the larger of a and b; NaN loses (np.fmax) unless propagate_nan=True"),
                    "tp::map_op::MaximumNaN", &host_map<map_op::MaximumNaN, 2>),
      map<map_op::Fma, 3>("fma", {"a", "b", "c"}, {0, 1, 2}, kFloats, "tp::map_op::Fma", "a * b + c, rounded once"),
      cast,
      map<map_op::Copy, 1>("copy", {"src"}, {0}, kFloats, "tp::map_op::Copy",
                           "src restaged: the same values in another storage or layout"),
      treduce,
  };
}

}  // namespace

const char* family_name(OpFamily f) {
  switch (f) {
    case OpFamily::reduction: return "reduction";
    case OpFamily::elementwise: return "elementwise";
    case OpFamily::collective: return "collective";
  }
  return "?";
}

const char* nan_rule_text(NanRule r) {
  switch (r) {
    case NanRule::ieee: return "ieee: NaN propagates";
    case NanRule::fmax: return "fmax: a NaN meeting a number yields the number; propagate_nan=True propagates";
    case NanRule::none: return "none: reads no values";
  }
  return "?";
}

bool OpDef::takes(DType t) const { return std::find(dtypes.begin(), dtypes.end(), t) != dtypes.end(); }
bool OpDef::exact_for(DType t) const {
  return std::find(exactly_rounded.begin(), exactly_rounded.end(), t) != exactly_rounded.end();
}
bool OpDef::has_option(const std::string& key) const {
  return std::find(options.begin(), options.end(), key) != options.end();
}

const std::vector<OpDef>& op_table() {
  static const std::vector<OpDef> table = build_table();
  return table;
}

const OpDef& op_def(const std::string& name) {
  for (const OpDef& d : op_table()) {
    if (d.name == name) return d;
  }
  std::string names;
  for (const OpDef& d : op_table()) names += (names.empty() ? "" : ", ") + d.name;
  throw ValueError("op: '" + name + "' is not a tileprim op; the ops are " + names);
}

}  // namespace tp
