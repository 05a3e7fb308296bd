// tileprim's own tanh, erf and sigmoid (the activations of the layers LLMs are made of) for float
// and double: exp's range reduction (transcendental.cuh) plus short polynomials, written only in
// IEEE-rounded operations (add, mul, fma, division-free reciprocals, moves of exponent bits,
// comparisons and selects). The GPU compiles these functions and the CPU backend instantiates the
// same ones, so both give the same bits; no CUDA or C library math function is called.
//
// Each op yields a Value (hi + lo) * 2^k, as transcendental.cuh's do, rounded once at the end;
// float16 and bfloat16 take the float Value nudged toward hi + lo and rounded once to 16 bits
// (transcendental16.cuh's `nudged`). Measured accuracy: the op table.
//
// Included by numeric.cuh after the 16-bit types, whose overloads end this file.
#pragma once

namespace tp {
namespace ieee_math {

template <class T> struct ActivationFormat;
template <> struct ActivationFormat<float> {
  static constexpr float kTanhTiny = 0x1p-13f;  // below: tanh x = x - x^3/3 rounds to x
  static constexpr float kTanhBig = 10.0f;      // above: tanh rounds to 1 (clamped: e^-2t's 2^k stays normal)
  static constexpr float kErfSmall = 1.0f;      // below: erf = t + t R(t^2); above: 1 - e^-t^2 erfcx(t)
  static constexpr float kErfOne = 4.0f;        // above: erf rounds to 1 (erfc(3.92) < 2^-25)
  static constexpr float kErfTiny = 0x1p-100f, kErfScale = 0x1p64f, kErfScaleExponent = -64.0f;
  // R(z) = erf(t) / t - 1 on z = t^2 in [0, 1] as kErfC0 + kErfC1 z + z^2 erf_tail(z) (error 2^-30.1
  // relative to erf(t) / t): the first two terms are summed as a pair, so that only the tail's
  // rounding (a tenth of R) reaches the result
  static constexpr float kErfC0 = 0x1.06eba8p-3f, kErfC1 = -0x1.812744p-2f;
  static TP_HD float erf_tail(float z) {
    float p = -0x1.2307bcp-17f;
    p = fma(p, z, 0x1.c8c8bp-14f);
    p = fma(p, z, -0x1.b9d556p-11f);
    p = fma(p, z, 0x1.55e0eep-8f);
    p = fma(p, z, -0x1.b82232p-6f);
    return fma(p, z, 0x1.ce2ea2p-4f);
  }
  // erfcx(t) = e^(t^2) erfc(t) on [1, 2), [2, 3), [3, 4] (interval i), a polynomial in t - mid_i
  // each (relative errors 2^-27.9, 2^-25.1, 2^-25.7; erfc's error reaches erf scaled by erfc / erf
  // <= 0.19)
  static TP_HD float erfcx(int i, float v) {
    float p = i == 0 ? 0x1.f3e984p-13f : i == 1 ? 0x1.e4b68ep-15f : 0x1.771862p-16f;
    p = fma(p, v, i == 0 ? -0x1.7264f2p-11f : i == 1 ? -0x1.ffaf2p-15f : -0x1.2f23fep-17f);
    p = fma(p, v, i == 0 ? 0x1.ed8176p-10f : i == 1 ? 0x1.899beap-13f : 0x1.9e0fecp-16f);
    p = fma(p, v, i == 0 ? -0x1.50a684p-8f : i == 1 ? -0x1.807288p-11f : -0x1.4560f8p-13f);
    p = fma(p, v, i == 0 ? 0x1.b65c7cp-7f : i == 1 ? 0x1.43eebp-9f : 0x1.575298p-11f);
    p = fma(p, v, i == 0 ? -0x1.0dc69cp-5f : i == 1 ? -0x1.06322p-7f : -0x1.5e5eeep-9f);
    p = fma(p, v, i == 0 ? 0x1.37ea22p-4f : i == 1 ? 0x1.989444p-6f : 0x1.5d56d2p-7f);
    p = fma(p, v, i == 0 ? -0x1.4f1986p-3f : i == 1 ? -0x1.3086d8p-4f : -0x1.5285d2p-5f);
    return fma(p, v, i == 0 ? 0x1.494dbp-2f : i == 1 ? 0x1.afbb4p-3f : 0x1.3e0a9ap-3f);
  }
  static TP_HD int erfc_interval(float t) { return t < 2.0f ? 0 : t < 3.0f ? 1 : 2; }
  static TP_HD float erfc_middle(int i) { return i == 0 ? 1.5f : i == 1 ? 2.5f : 3.5f; }
};
template <> struct ActivationFormat<double> {
  static constexpr double kTanhTiny = 0x1p-27;
  static constexpr double kTanhBig = 20.0;
  static constexpr double kErfSmall = 1.0;
  static constexpr double kErfOne = 6.0;  // erfc(5.87) < 2^-54
  static constexpr double kErfTiny = 0x1p-900, kErfScale = 0x1p128, kErfScaleExponent = -128.0;
  // (error 2^-56.3 relative to erf(t) / t)
  static constexpr double kErfC0 = 0x1.06eba8214db69p-3, kErfC1 = -0x1.812746b037a01p-2;
  static TP_HD double erf_tail(double z) {
    double p = -0x1.0aaeda9ae27ecp-35;
    p = fma(p, z, 0x1.22775967eaeb5p-32);
    p = fma(p, z, -0x1.e14f4c86d42bep-30);
    p = fma(p, z, 0x1.0e5fffdc11399p-26);
    p = fma(p, z, -0x1.61c33716befd5p-23);
    p = fma(p, z, 0x1.ba20db9c24cd9p-20);
    p = fma(p, z, -0x1.f4d6525cf97adp-17);
    p = fma(p, z, 0x1.f9a35712997fdp-14);
    p = fma(p, z, -0x1.c02db590329afp-11);
    p = fma(p, z, 0x1.565bcd1705b84p-8);
    p = fma(p, z, -0x1.b82ce312c3fa7p-6);
    return fma(p, z, 0x1.ce2f21a043a4cp-4);
  }
  // on [1, 2), [2, 3), [3, 4), [4, 6] (relative errors 2^-54.1, 2^-55.1, 2^-56.7, 2^-54.9)
  static TP_HD double erfcx(int i, double v) {
    double p = i == 0 ? -0x1.a4b968f55f74ap-25 : i == 1 ? -0x1.e7eab178f712p-31
                  : i == 2 ? -0x1.8ae56234e6201p-38 : -0x1.162a61d920b57p-41;
    p = fma(p, v, i == 0 ? 0x1.83bc2d4d6b578p-23 : i == 1 ? 0x1.0d4f97788a8c9p-28
                  : i == 2 ? 0x1.2a84c5fd8302ep-33 : 0x1.b9256c207703fp-39);
    p = fma(p, v, i == 0 ? -0x1.3f733a54197a7p-21 : i == 1 ? -0x1.161cf9cf43483p-26
                  : i == 2 ? -0x1.b3c0f8b1e22c9p-31 : -0x1.343e639a89e9ap-36);
    p = fma(p, v, i == 0 ? 0x1.14b18602ed20fp-19 : i == 1 ? 0x1.206bac416bfb8p-24
                  : i == 2 ? 0x1.0444e69575bdbp-28 : 0x1.d7b9a1b6e3c1ap-34);
    p = fma(p, v, i == 0 ? -0x1.d4187785e6c2fp-18 : i == 1 ? -0x1.2512238e15b17p-22
                  : i == 2 ? -0x1.381aaa849941ep-26 : -0x1.66fc7f2b1b4a6p-31);
    p = fma(p, v, i == 0 ? 0x1.7f9e9116b46b3p-16 : i == 1 ? 0x1.234ea7c762768p-20
                  : i == 2 ? 0x1.7246b7a28205ep-24 : 0x1.0cce5aadf348ap-28);
    p = fma(p, v, i == 0 ? -0x1.30c0e8f7a1934p-14 : i == 1 ? -0x1.1ad1157a3a13p-18
                  : i == 2 ? -0x1.af5ded9dd3497p-22 : -0x1.8dabb3835f4e7p-26);
    p = fma(p, v, i == 0 ? 0x1.d450893d28f74p-13 : i == 1 ? 0x1.0bcba8778dd9ep-16
                  : i == 2 ? 0x1.ed2ab22d764dfp-20 : 0x1.228a5f304a442p-23);
    p = fma(p, v, i == 0 ? -0x1.5b0abfe6e39bap-11 : i == 1 ? -0x1.edd423825990bp-15
                  : i == 2 ? -0x1.146bc38f02d6p-17 : -0x1.a3193ce20d5f6p-21);
    p = fma(p, v, i == 0 ? 0x1.ee705e9deeec7p-10 : i == 1 ? 0x1.ba8a67bb750bbp-13
                  : i == 2 ? 0x1.2f839e3d40694p-15 : 0x1.2a41155e9b346p-18);
    p = fma(p, v, i == 0 ? -0x1.513ed76017387p-8 : i == 1 ? -0x1.809ce8ab60b16p-11
                  : i == 2 ? -0x1.460abd6b94262p-13 : -0x1.a2a81d251b093p-16);
    p = fma(p, v, i == 0 ? 0x1.b65944f321007p-7 : i == 1 ? 0x1.435c04e21a60dp-9
                  : i == 2 ? 0x1.5632136da0499p-11 : 0x1.219f2c3329202p-13);
    p = fma(p, v, i == 0 ? -0x1.0dc51d2941db2p-5 : i == 1 ? -0x1.0632076809df1p-7
                  : i == 2 ? -0x1.5e5d7e9898e88p-9 : -0x1.8abc198707757p-11);
    p = fma(p, v, i == 0 ? 0x1.37ea271bc5611p-4 : i == 1 ? 0x1.98958a7a8e3bap-6
                  : i == 2 ? 0x1.5d58113337879p-7 : 0x1.08cf82b79a1c4p-8);
    p = fma(p, v, i == 0 ? -0x1.4f1988444caf7p-3 : i == 1 ? -0x1.3086d7f01ac85p-4
                  : i == 2 ? -0x1.5285d2eb1ef74p-5 : -0x1.5d843497d4f3bp-6);
    return fma(p, v, i == 0 ? 0x1.494daffa2ad68p-2 : i == 1 ? 0x1.afbb3f3b7343bp-3
                  : i == 2 ? 0x1.3e0a99a0ee914p-3 : 0x1.c57239e943d1ap-4);
  }
  static TP_HD int erfc_interval(double t) { return t < 2.0 ? 0 : t < 3.0 ? 1 : t < 4.0 ? 2 : 3; }
  static TP_HD double erfc_middle(int i) { return i == 0 ? 1.5 : i == 1 ? 2.5 : i == 2 ? 3.5 : 5.0; }
};

// -v where x's sign bit is set (so that -0 comes out -0), every member
template <class T> TP_HD Value<T> with_sign_of(T x, const Value<T>& v) {
  const bool negative = sign_bit(x);
  return {negative ? -v.hi : v.hi, negative ? -v.lo : v.lo, v.k};
}

// n / d for n = nh + nl and d = dh + dl with dh in [1, 2]: the quotient by the reciprocal's line
// and Newton steps, corrected by its remainder (as silu's)
template <class T> TP_HD Value<T> divided(T nh, T nl, T dh, T dl) {
  const T inv = reciprocal_from_line<T, Format<T>::kNewtonSteps>(dh, T(24.0 / 17), T(8.0 / 17)), q = nh * inv;
  const T c = ((fma(-q, dh, nh) + nl) - q * dl) * inv;
  return fast_two_sum(q, c);
}

// tanh t = -u / (2 + u) with u = e^-2t - 1 = hi 2^k - 1 + lo 2^k for t = |x| (hi 2^k exact; the
// sum kept as a pair), so that neither side cancels; t clamped where tanh rounds to 1, and below
// kTanhTiny tanh x is x. NaN stays NaN.
template <class T> TP_HD Value<T> tanh_value(T x) {
  using F = ActivationFormat<T>;
  const T t = magnitude(x);
  const Value<T> e = exp_value(T(-2) * (t > F::kTanhBig ? F::kTanhBig : t));
  const T scale = pow2(e.k);
  const Value<T> u = two_sum(T(-1), e.hi * scale);
  const T u_lo = u.lo + e.lo * scale;
  const Value<T> d = fast_two_sum(T(2), u.hi);
  const Value<T> v = divided(-u.hi, -u_lo, d.hi, d.lo + u_lo);
  return with_sign_of(x, t < F::kTanhTiny ? Value<T>{t, T(0), T(0)} : v);
}

// sigmoid x = 1 / (1 + e) (x >= 0) or e / (1 + e) (x < 0), e = e^-|x|, as silu's quotient with the
// numerator 1 or e; for x < 0 the 2^k of e stays outside until the end, so subnormal results
// round once. +-inf give 1 and 0 through exp's clamps; NaN stays NaN.
template <class T> TP_HD Value<T> sigmoid_value(T x) {
  using F = Format<T>;
  const bool negative = x < T(0);
  const Value<T> e = exp_value(negative ? (x < F::kExpMin ? F::kExpMin : x) : -x);
  // below 2^kMinExponent e no longer counts beside 1: one scaling, its 2^k clamped
  const T scale = pow2(e.k < F::kMinExponent ? F::kMinExponent : e.k);
  const Value<T> d = fast_two_sum(T(1), e.hi * scale);
  Value<T> v = divided(negative ? e.hi : T(1), negative ? e.lo : T(0), d.hi, d.lo + e.lo * scale);
  v.k = negative ? e.k : T(0);
  return v;
}

// erf t = t + t R(t^2) below kErfSmall, R's leading terms and t R as pairs, t^2 = z + z_lo exactly (t
// scaled by 2^64, 2^128 where it is tiny, so that t R stays normal); 1 - e^-t^2 erfcx(t) above,
// t^2 = s + s_lo exactly and e^-t^2 = e^-s (1 - s_lo), with erfc = e^-t^2 erfcx kept as a pair; t =
// |x| clamped where erf rounds to 1. Sign restored at the end (erf is odd); NaN stays NaN.
template <class T> TP_HD Value<T> erf_value(T x) {
  using F = ActivationFormat<T>;
  const T t = magnitude(x);
  // below: t + t R(z), a pair
  const T z = t * t, z_lo = fma(t, t, -z);
  const T u = F::kErfC1 * z, u_lo = fma(F::kErfC1, z, -u) + F::kErfC1 * z_lo;
  const Value<T> c = two_sum(F::kErfC0, u);
  const Value<T> r = two_sum(c.hi, z * z * F::erf_tail(z));
  const T r_lo = r.lo + (c.lo + u_lo);
  const bool tiny = t < F::kErfTiny;
  const T ts = tiny ? t * F::kErfScale : t;
  const T p = ts * r.hi;
  const Value<T> a = fast_two_sum(ts, p);
  const Value<T> small = fast_two_sum(a.hi, a.lo + (fma(ts, r.hi, -p) + ts * r_lo));
  // above: 1 - erfc
  const T tc = t > F::kErfOne ? F::kErfOne : t;
  const T s = tc * tc, s_lo = fma(tc, tc, -s);
  const Value<T> e = exp_value(-s);
  const int i = F::erfc_interval(tc);
  const T q = F::erfcx(i, tc - F::erfc_middle(i));
  const T m = e.hi * q, m_lo = fma(e.hi, q, -m) + (e.lo - e.hi * s_lo) * q;
  const T scale = pow2(e.k);
  const Value<T> one = fast_two_sum(T(1), -(m * scale));
  const Value<T> large = fast_two_sum(one.hi, one.lo - m_lo * scale);
  const bool below = t < F::kErfSmall;
  return with_sign_of(x, Value<T>{below ? small.hi : large.hi, below ? small.lo : large.lo,
                                  below && tiny ? F::kErfScaleExponent : T(0)});
}

}  // namespace ieee_math

// float and double: the Value rounded, a NaN result the canonical NaN (transcendental.cuh's rule)
#define TP_ACTIVATION(op)                                                                          \
  TP_HD float op(float x) { return ieee_math::canonical_nan(ieee_math::round(ieee_math::op##_value(x))); } \
  TP_HD double op(double x) { return ieee_math::canonical_nan(ieee_math::round(ieee_math::op##_value(x))); }
TP_ACTIVATION(tanh)
TP_ACTIVATION(erf)
TP_ACTIVATION(sigmoid)
#undef TP_ACTIVATION

namespace ieee_math16 {
// A float Value rounded once to the 16-bit format F: hi nudged toward hi + lo, then 2^k (F's
// times_pow2, which takes k + kShifter: exact, |k| being far below 2^22); +-0 is itself (nudging a
// zero would make it a NaN)
template <class F> TP_HD float rounded_for(float x, const ieee_math::Value<float>& v) {
  return x == 0.0f ? x : times_pow2<F>(nudged(v), v.k + kShifter);
}

// sigmoid's exact path: the float Value rounded once, x clamped where the result rounds to 0 (so
// that 2^k stays within F's times_pow2); the rare branch of `sigmoid` below
template <class F> TP_HD_OUT_OF_LINE float sigmoid_exact(float x) {
  return rounded_for<F>(1.0f, ieee_math::sigmoid_value(clamp(x, F::kExpZero, limits<float>::pos_inf())));
}
// sigmoid x = 1 / (1 + e) (x >= 0) or e / (1 + e) (x < 0): the logistic fast path
// (transcendental16.cuh; here n = e's p is exact, so its error bound holds with room)
template <class F> TP_HD float sigmoid_estimate(float x) {
  const float minus_abs = -magnitude(x);
  const Logistic l = logistic<F>(minus_abs < F::kExpZero ? F::kExpZero : minus_abs);  // NaN stays
  return logistic_quotient<F>(x, 1.0f, 1.0f, l);
}
template <class F> TP_HD float sigmoid(float x) {
  const float y = sigmoid_estimate<F>(x);
  return rounds_as_exact<F>(y) ? y : sigmoid_exact<F>(x);
}
}  // namespace ieee_math16

// The 16-bit types on both backends, from the float Values (the conversion makes a NaN the
// canonical one); sigmoid through its fast path. Correct at every one of the 65,536 inputs of each
// format: tests/test_numerics.py.
#define TP_SIXTEEN_BIT_ACTIVATIONS(H, Format16)                                                            \
  TP_HD H tanh(H x) {                                                                                   \
    const float f = widen(x);                                                                           \
    return convert_to<H>::from(ieee_math16::rounded_for<Format16>(f, ieee_math::tanh_value(f)));        \
  }                                                                                                     \
  TP_HD H erf(H x) {                                                                                    \
    const float f = widen(x);                                                                           \
    return convert_to<H>::from(ieee_math16::rounded_for<Format16>(f, ieee_math::erf_value(f)));         \
  }                                                                                                     \
  TP_HD H sigmoid(H x) { return convert_to<H>::from(ieee_math16::sigmoid<Format16>(widen(x))); }

#if TP_ON_DEVICE && defined(TP_WITH_FP16)
TP_SIXTEEN_BIT_ACTIVATIONS(__half, ieee_math16::Half)
#endif
#if TP_ON_DEVICE && defined(TP_WITH_BF16)
TP_SIXTEEN_BIT_ACTIVATIONS(__nv_bfloat16, ieee_math16::BFloat16)
#endif

}  // namespace tp
