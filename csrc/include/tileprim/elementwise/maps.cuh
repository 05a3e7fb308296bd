// elementwise -> reg: every thread applies the op to each register of its bundle (the
// slots its layout gives it). Operands are register arrays or scalars broadcast to all.
// The op table (csrc/ops/op_table.cc) names each map functor here by its C++ name.
#pragma once
#include "../numeric.cuh"

namespace tp {

// A register operand: one lane's registers start at regs (+ lane * stride on the host).
template <class T> struct RegOperand {
  const T* regs;
  template <class Lanes> TP_HD RegOperand on(const Lanes& g, int stride, int lane) const {
    return {g.regs(regs, stride, lane)};
  }
  TP_HD T operator[](long long i) const { return regs[i]; }
};
template <class T> struct ScalarOperand {
  T value;
  template <class Lanes> TP_HD ScalarOperand on(const Lanes&, int, int) const { return *this; }
  TP_HD T operator[](long long) const { return value; }
};

// A map's operand as the body names it: registers (or a shared tile) by their address; a
// scalar, which a tile program passes for a value every lane holds, as it is.
template <class T> TP_HD RegOperand<T> operand(const T* regs) { return {regs}; }
template <class T> TP_HD ScalarOperand<T> operand(const ScalarOperand<T>& scalar) { return scalar; }

namespace map_op {

struct Zero {};  // no operand: the output dtype's +0
struct Copy {    // fill: the scalar operand into every register
  template <class T> static TP_HD T apply(T x) { return x; }
};
struct Cast {};  // one rounding to the output dtype
struct Sqrt {
  template <class T> static TP_HD T apply(T x) { return sqrt(x); }
};
// exp, exp2, log and log2 say too where x lies in their normal range (fits_normal): there
// apply_normal gives apply's bits with fewer instructions (no clamps, specials or scaling of
// subnormals; numeric.cuh's *_normal), which normal_registers (below) takes per bundle
#define TP_MAP_WITH_NORMAL_FORM(Name, fn)                                              \
  struct Name {                                                                        \
    template <class T> static TP_HD T apply(T x) { return fn(x); }                      \
    template <class T> static TP_HD bool fits_normal(T x) { return fn##_fits_normal(x); } \
    template <class T> static TP_HD T apply_normal(T x) { return fn##_normal(x); }      \
  };
TP_MAP_WITH_NORMAL_FORM(Exp, exp)
TP_MAP_WITH_NORMAL_FORM(Exp2, exp2)
TP_MAP_WITH_NORMAL_FORM(Log2, log2)
TP_MAP_WITH_NORMAL_FORM(Log, log)
#undef TP_MAP_WITH_NORMAL_FORM
struct Rsqrt {
  template <class T> static TP_HD T apply(T x) { return rsqrt(x); }
};
struct Reciprocal {
  template <class T> static TP_HD T apply(T x) { return reciprocal(x); }
};
// silu and sigmoid of 16-bit registers: on the GPU estimated by their fast forms and checked
// (estimated_registers, estimated.cuh)
struct Silu {  // x * sigmoid(x), numeric.cuh's own
  template <class T> static TP_HD T apply(T x) { return silu(x); }
};
struct Tanh {  // activation.cuh's own, as the next two
  template <class T> static TP_HD T apply(T x) { return tanh(x); }
};
struct Erf {
  template <class T> static TP_HD T apply(T x) { return erf(x); }
};
struct Sigmoid {
  template <class T> static TP_HD T apply(T x) { return sigmoid(x); }
};
struct Add {
  template <class T> static TP_HD T apply(T a, T b) { return add(a, b); }
};
struct Sub {
  template <class T> static TP_HD T apply(T a, T b) { return sub(a, b); }
};
struct Mul {
  template <class T> static TP_HD T apply(T a, T b) { return mul(a, b); }
};
struct Fdiv {
  template <class T> static TP_HD T apply(T a, T b) { return fdiv(a, b); }
};
// fdiv where no |a| exceeds its |b| (a nonnegative tile divided by its own sum: program_plan.cc)
struct FdivOfPart : Fdiv {};
struct Maximum {
  template <class T> static TP_HD T apply(T a, T b) { return max_num(a, b); }
};
struct MaximumNaN {
  template <class T> static TP_HD T apply(T a, T b) { return max_nan(a, b); }
};
struct Fma {
  template <class T> static TP_HD T apply(T a, T b, T c) { return fma(a, b, c); }
};
// IEEE comparisons as masks in the operands' dtype: a NaN compares false (ne: true), -0 equals +0
template <class T> TP_HD T mask_of(bool c) { return cast<T>(c ? 1.0f : 0.0f); }
struct Eq {
  template <class T> static TP_HD T apply(T a, T b) { return mask_of<T>(widen(a) == widen(b)); }
};
struct Ne {
  template <class T> static TP_HD T apply(T a, T b) { return mask_of<T>(widen(a) != widen(b)); }
};
struct Lt {
  template <class T> static TP_HD T apply(T a, T b) { return mask_of<T>(widen(a) < widen(b)); }
};
struct Le {
  template <class T> static TP_HD T apply(T a, T b) { return mask_of<T>(widen(a) <= widen(b)); }
};
struct Gt {
  template <class T> static TP_HD T apply(T a, T b) { return mask_of<T>(widen(a) > widen(b)); }
};
struct Ge {
  template <class T> static TP_HD T apply(T a, T b) { return mask_of<T>(widen(a) >= widen(b)); }
};
struct Where {  // a where cond != 0 (a NaN cond included), else b: the value moves unchanged
  template <class T> static TP_HD T apply(T cond, T a, T b) { return widen(cond) != 0 ? a : b; }
};

// fastmath=True: the GPU's approximations (transcendental_fast.cuh), the exact ops on the host
#define TP_FAST_MAP(Name, fn)                                                  \
  struct Name {                                                                \
    template <class T> static TP_HD T apply(T x) { return fast_math::fn(x); } \
  };
TP_FAST_MAP(FastExp, exp)
TP_FAST_MAP(FastExp2, exp2)
TP_FAST_MAP(FastLog, log)
TP_FAST_MAP(FastLog2, log2)
TP_FAST_MAP(FastRsqrt, rsqrt)
TP_FAST_MAP(FastSilu, silu)
TP_FAST_MAP(FastSigmoid, sigmoid)
TP_FAST_MAP(FastTanh, tanh)
#undef TP_FAST_MAP
// a / b: where b is one value for the whole bundle (a row's sum, broadcast), a times b's
// reciprocal on the GPU (multiply_by_reciprocal, below); an IEEE division elsewhere
struct FastFdiv {
  template <class T> static TP_HD T apply(T a, T b) { return fdiv(a, b); }
};

// Op as a function to the output dtype TD: the same-dtype maps return TD already; Zero and
// Cast need TD to know what to produce.
template <class Op, class TD> struct To {
  template <class... A> static TD TP_HD apply(A... a) { return Op::apply(a...); }
};
template <class TD> struct To<Zero, TD> {
  static TD TP_HD apply() { return cast<TD>(0.0f); }
};
template <class TD> struct To<Cast, TD> {
  template <class From> static TD TP_HD apply(From x) { return cast<TD>(x); }
};

}  // namespace map_op

// Paired<Op, T>::type: the two-lane type where Op on a pair gives each lane the bits of Op on
// one T (numeric.cuh defines those pair overloads); none elsewhere, and none on the host.
template <class Op, class T> struct Paired {};
#if TP_ON_DEVICE
#define TP_PAIRED(op, T, T2)              \
  template <> struct Paired<map_op::op, T> { \
    using type = T2;                      \
  };
// the maps of one exactly rounded instruction pair on both 2-byte types; the others (sqrt,
// division, the transcendentals) compute in float, one lane at a time
#define TP_PAIRED_EXACT(T, T2)  \
  TP_PAIRED(Add, T, T2)         \
  TP_PAIRED(Sub, T, T2)         \
  TP_PAIRED(Mul, T, T2)         \
  TP_PAIRED(Fma, T, T2)         \
  TP_PAIRED(Maximum, T, T2)     \
  TP_PAIRED(MaximumNaN, T, T2)
#if defined(TP_WITH_FP16)
TP_PAIRED_EXACT(__half, __half2)
#endif
#if defined(TP_WITH_BF16)
TP_PAIRED_EXACT(__nv_bfloat16, __nv_bfloat162)
#endif
#undef TP_PAIRED_EXACT
#undef TP_PAIRED
#endif

template <class...> using void_t = void;
template <class Op, class T, class = void> struct has_pair {
  static constexpr bool value = false;
};
template <class Op, class T> struct has_pair<Op, T, void_t<typename Paired<Op, T>::type>> {
  static constexpr bool value = true;
};

// dst[f] = fast(x[f]) for every slot where no x of the bundle lies `outside` the fast form's
// range, else general(x[f]) for all: a cheaper form with the general one's bits within its range,
// chosen once per bundle (one branch, not one per element). Each `outside` predicate is a chain of
// its own, one comparison a slot (two tests of a slot combined first would cost an instruction
// more a slot).
template <int kUnroll, class TD, class X, class Fast, class General, class... Outside>
TP_HD void map_fast_or_general(TD* dst, int slots, const X& x, Fast fast, General general, Outside... outside) {
  bool beyond[sizeof...(Outside)] = {};
  TP_UNROLL_BY(kUnroll)
  for (int f = 0; f < slots; ++f) {
    int chain = 0;
    ((beyond[chain++] |= outside(x[f])), ...);
  }
  bool any = false;
  for (bool b : beyond) any |= b;
  if (!any) {
    TP_UNROLL_BY(kUnroll)
    for (int f = 0; f < slots; ++f) dst[f] = fast(x[f]);
    return;
  }
  TP_UNROLL_BY(kUnroll)
  for (int f = 0; f < slots; ++f) dst[f] = general(x[f]);
}

// Fdiv by one scalar for the whole bundle (a row's sum, broadcast): on the GPU each quotient in
// float from the divisor's reciprocal and one correction (numeric.cuh's FloatDivisor, float
// fdiv's bits), rounded once to a 16-bit dtype, but for a bundle where one leaves its range, which
// divides as the host does. Where it holds the quotient is a normal float, so float's rounding then
// the 16-bit one give the quotient correctly rounded (float's precision is at least 2p + 2), the
// bits of the host's division (bfloat16 divides in double there: transcendental.cuh); the double
// division of every element took 15 instructions, 3 of them conversions on a slow pipe (sm_90a,
// bfloat16 softmax of rows of 32000). FdivOfPart's numerators never exceed the divisor
// (|a| <= |b| < |b| 2^126 wherever b is in range): one comparison an element fewer (H200, bfloat16
// softmax of rows of 16384: about 4 %).
template <class Op, class TD, class... Operands> constexpr bool divides_by_one_float = false;
#define TP_DIVIDES_BY_ONE_FLOAT(T)                                                                  \
  template <class A> constexpr bool divides_by_one_float<map_op::Fdiv, T, A, ScalarOperand<T>> = true; \
  template <class A> constexpr bool divides_by_one_float<map_op::FdivOfPart, T, A, ScalarOperand<T>> = true;
TP_DIVIDES_BY_ONE_FLOAT(float)
#if TP_ON_DEVICE && defined(TP_WITH_FP16)
TP_DIVIDES_BY_ONE_FLOAT(__half)
#endif
#if TP_ON_DEVICE && defined(TP_WITH_BF16)
TP_DIVIDES_BY_ONE_FLOAT(__nv_bfloat16)
#endif
#undef TP_DIVIDES_BY_ONE_FLOAT
template <class Op> constexpr bool numerator_may_exceed = true;
template <> constexpr bool numerator_may_exceed<map_op::FdivOfPart> = false;

template <int kUnroll, bool kNumeratorMayExceed, class TD, class A>
TP_HD void divide_registers(TD* dst, int slots, const A& a, const ScalarOperand<TD>& b) {
  const auto divide = [&](TD x) { return fdiv(x, b.value); };
#if TP_ON_DEVICE
  const FloatDivisor divisor(widen(b.value));
  const auto fast = [&](TD x) { return convert_to<TD>::from(divisor.divide(widen(x))); };
  const auto too_small = [&](TD x) { return divisor.too_small(widen(x)); };
  if constexpr (kNumeratorMayExceed) {
    map_fast_or_general<kUnroll>(dst, slots, a, fast, divide, too_small,
                                 [&](TD x) { return divisor.too_large(widen(x)); });
  } else {
    map_fast_or_general<kUnroll>(dst, slots, a, fast, divide, too_small);
  }
#else
  TP_UNROLL_BY(kUnroll)
  for (int f = 0; f < slots; ++f) dst[f] = divide(a[f]);
#endif
}

// A rare path's form is a call on the GPU: inlined beside the fast one in an unrolled bundle, ptxas
// interleaves the two and the registers of the rare path hold the whole kernel to fewer blocks
// (sm_90a, logsumexp of rows of 16384 at cta(256): 95 float32 / 128 bfloat16 registers, 2 blocks
// per SM; with the call 80, 3 blocks).
template <class Op, class T, class... More> TP_HD_OUT_OF_LINE T apply_out_of_line(T x, More... more) {
  return Op::apply(x, more...);
}

// fastmath=True's division of float, float16 or bfloat16 registers by one scalar: each a times
// RN(1/b), the reciprocal IEEE-rounded once per bundle, the product in float rounded once to the
// dtype; a b whose reciprocal is not a normal float (0, an infinity, NaN, |b| beyond 2^126 or
// below 2^-126) divides instead (GPU only: the host divides, as every exact division does).
template <class Op, class TD, class... Operands> constexpr bool multiplies_by_reciprocal = false;
#if TP_ON_DEVICE
template <class A> constexpr bool multiplies_by_reciprocal<map_op::FastFdiv, float, A, ScalarOperand<float>> = true;
#if defined(TP_WITH_FP16)
template <class A> constexpr bool multiplies_by_reciprocal<map_op::FastFdiv, __half, A, ScalarOperand<__half>> = true;
#endif
#if defined(TP_WITH_BF16)
template <class A>
constexpr bool multiplies_by_reciprocal<map_op::FastFdiv, __nv_bfloat16, A, ScalarOperand<__nv_bfloat16>> = true;
#endif
#endif

template <int kUnroll, class TD, class A>
TP_HD void multiply_by_reciprocal(TD* dst, int slots, const A& a, const ScalarOperand<TD>& b) {
  const float inverse = reciprocal(widen(b.value));
  if ((magnitude(inverse) >= 0x1p-126f) & (magnitude(inverse) < limits<float>::pos_inf())) {
    TP_UNROLL_BY(kUnroll)
    for (int f = 0; f < slots; ++f) dst[f] = convert_to<TD>::from(widen(a[f]) * inverse);
    return;
  }
  TP_UNROLL_BY(kUnroll)
  for (int f = 0; f < slots; ++f) dst[f] = apply_out_of_line<map_op::Fdiv>(a[f], b.value);
}

// exp, exp2 (every float dtype), log and log2 (float16, bfloat16) of registers: where every x of
// the bundle lies in the op's normal range, its normal form, the same bits in fewer instructions
// (float32 exp: about 11 fewer; bfloat16 exp: no clamp and one product for 2^k; 16-bit log: no
// specials); a bundle with an x beyond (or a NaN) takes apply, out of line.
template <class T> constexpr bool is_wide = false;  // float and double: tileprim's own wide algorithms
template <> constexpr bool is_wide<float> = true;
template <> constexpr bool is_wide<double> = true;
template <class Op, class TD, class... Operands> constexpr bool has_normal_form = false;
template <class T> constexpr bool has_normal_form<map_op::Exp, T, RegOperand<T>> = true;
template <class T> constexpr bool has_normal_form<map_op::Exp2, T, RegOperand<T>> = true;
template <class T> constexpr bool has_normal_form<map_op::Log, T, RegOperand<T>> = !is_wide<T>;
template <class T> constexpr bool has_normal_form<map_op::Log2, T, RegOperand<T>> = !is_wide<T>;

template <class Op, int kUnroll, class T> TP_HD void normal_registers(T* dst, int slots, const RegOperand<T>& x) {
  map_fast_or_general<kUnroll>(
      dst, slots, x, [](T v) { return Op::apply_normal(v); }, [](T v) { return apply_out_of_line<Op>(v); },
      [](T v) { return !Op::fits_normal(v); });
}

// silu and sigmoid of float16 or bfloat16 registers on the GPU: the chain of one op rounded to
// 16 bits, estimated by the op's fast form and its rounding checked (estimated.cuh, where
// estimated_registers is defined); the exact bits everywhere.
template <class Op, class TD, class... Operands> constexpr bool has_estimate = false;
#if TP_ON_DEVICE
template <class T> constexpr bool has_estimate<map_op::Silu, T, RegOperand<T>> = !is_wide<T>;
template <class T> constexpr bool has_estimate<map_op::Sigmoid, T, RegOperand<T>> = !is_wide<T>;
#endif

// slots estimated and checked at once: a program's tile of more takes them this many at a time, so
// that what a group's check reads dies with it (more live registers would take blocks off the SM)
constexpr int kEstimateGroup = 8;

// x's slot `bit` (one bit set) of `slots`, and a value put into y there, by selects: a run-time
// index would put the registers in memory (the rare paths that redo one missed slot)
template <int kUnroll, class X> TP_HD auto slot_at(const X& x, int slots, unsigned bit) {
  auto v = x[0];
  TP_UNROLL_BY(kUnroll)
  for (int f = 1; f < slots; ++f) v = (bit >> f) & 1u ? x[f] : v;
  return v;
}
template <int kUnroll, class T> TP_HD void set_slot(T* y, int slots, unsigned bit, T v) {
  TP_UNROLL_BY(kUnroll)
  for (int f = 0; f < slots; ++f) y[f] = (bit >> f) & 1u ? v : y[f];
}

template <class Op, int kUnroll, class T> TP_HD void estimated_registers(T* dst, int slots, const RegOperand<T>& x);

// dst[f] = Op(operands[f]...) for every register slot f of one bundle; two slots per
// instruction where the op pairs (16-bit maps run at twice the rate).
template <class Op, int kUnroll, class TD, class... Operands>
TP_HD void map_registers(TD* dst, int slots, const Operands&... operands) {
  if constexpr (has_estimate<Op, TD, Operands...>) {
    const auto& x = (operands, ...);
    TP_UNROLL_BY(kUnroll)
    for (int g = 0; g < slots; g += kEstimateGroup) {
      estimated_registers<Op, kUnroll>(dst + g, slots - g < kEstimateGroup ? slots - g : kEstimateGroup,
                                       RegOperand<TD>{x.regs + g});
    }
    return;
  }
  if constexpr (divides_by_one_float<Op, TD, Operands...>) {
    divide_registers<kUnroll, numerator_may_exceed<Op>>(dst, slots, operands...);
  } else if constexpr (multiplies_by_reciprocal<Op, TD, Operands...>) {
    multiply_by_reciprocal<kUnroll>(dst, slots, operands...);
  } else if constexpr (has_normal_form<Op, TD, Operands...>) {
    normal_registers<Op, kUnroll>(dst, slots, operands...);
  } else if constexpr (has_pair<Op, TD>::value) {
    using Pair = typename Paired<Op, TD>::type;
    TP_UNROLL_BY(kUnroll)
    for (int f = 0; f + 1 < slots; f += 2) {
      const Pair r = Op::apply(Pair(operands[f], operands[f + 1])...);
      dst[f] = r.x;
      dst[f + 1] = r.y;
    }
    if (slots % 2) dst[slots - 1] = Op::apply(operands[slots - 1]...);
  } else {
    TP_UNROLL_BY(kUnroll)
    for (int f = 0; f < slots; ++f) dst[f] = map_op::To<Op, TD>::apply(operands[f]...);
  }
}

// Every lane of the scope instance maps its own bundle; lanes never talk.
template <class Op, int kUnroll, class TD, class Lanes, class... Operands>
TP_HD void map_tile(const Lanes& g, TD* dst, int stride, int slots, const Operands&... operands) {
  g.each([&](int lane) {
    map_registers<Op, kUnroll>(g.regs(dst, stride, lane), slots, operands.on(g, stride, lane)...);
  });
}

}  // namespace tp
