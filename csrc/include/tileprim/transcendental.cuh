// tileprim's own exp, exp2, log, log2, rsqrt and silu for float and double: a range
// reduction plus a short polynomial, written only in IEEE-rounded operations (add, mul, fma,
// division, sqrt, moves of exponent bits, comparisons and selects). The GPU compiles these
// functions and the CPU backend instantiates the same ones, so both give the same bits; no
// CUDA or C library math function is called, whose last bits differ from each other.
//
// Each op first yields a Value: the result as (hi + lo) * 2^k with hi = RN(hi + lo) and
// |lo| <= ulp(hi) / 2, about 2^-27 (float) or 2^-56 (double) relative, and rounds hi * 2^k;
// float exp alone is faithful instead (float_exp: the op of softmax and cross-entropy, where
// instructions count; the Value form stays for the ops built on e^x).
// float16 and bfloat16 have their own, shorter algorithms (transcendental16.cuh). Written as
// selects, not branches, so host loops over them vectorize. Measured accuracy: the op table.
//
// Included by numeric.cuh after its exactly rounded arithmetic.
#pragma once

namespace tp {
namespace ieee_math {

template <class T> struct Format;
template <> struct Format<float> {
  using Bits = unsigned;
  using SignedBits = int;
  static constexpr int kMant = 23;
  static constexpr Bits kBias = 127, kMantMask = 0x007fffffu, kSqrtHalf = 0x3f3504f3u;
  static constexpr float kShifter = 0x1.8p23f;  // v + kShifter rounds |v| < 2^22 to an integer
  static constexpr float kMinNormal = 0x1p-126f, kSubnormalScale = 0x1p24f, kSubnormalExponent = -24.0f;
  static constexpr float kLn2Hi = 0x1.62e430p-1f, kLn2Lo = -0x1.05c610p-29f;      // ln 2 = hi + lo
  static constexpr float kLn2Short = 0x1.62e4p-1f, kLn2ShortLo = 0x1.7f7d1cp-20f;  // k * short is exact
  static constexpr float kLog2e = 0x1.715476p+0f, kLog2eLo = 0x1.4ae0c0p-26f;
  static constexpr float kExpMin = -128.0f, kExpMax = 89.0f;    // beyond: exp is 0 / inf, silu -0
  static constexpr float kExpNormal = 86.0f;  // |x| within: e^x's 2^k in [2^-124, 2^124], its result normal
  static constexpr float kMinExponent = -126.0f;
  static constexpr int kNewtonSteps = 3;  // 1/d from a start 1/17 off: (1/17)^8 < 2^-32
  static constexpr float kExp2Min = -152.0f, kExp2Max = 129.0f;
  static constexpr float kExp2Normal = 124.0f;  // |x| within: 2^x's 2^k in [2^-124, 2^124], its result normal
  static constexpr float kRsqrtBig = 0x1p100f, kRsqrtSmall = 0x1p-100f;  // x scaled by kRsqrtShift^+-1 beyond
  static constexpr float kRsqrtShift = 0x1p64f, kRsqrtPost = 0x1p32f;
  // (e^r - 1 - r - r^2/2) / r^3 on |r| <= ln2/2 (weighted error 2^-32.8)
  static TP_HD float exp_cubic(float r) {
    return fma(fma(fma(fma(0x1.9aa3f6p-13f, r, 0x1.6d5430p-10f), r, 0x1.1115b2p-7f), r, 0x1.5554e2p-5f), r,
               0x1.555552p-3f);
  }
  // (log((1+s)/(1-s)) - 2s) / s^3 as a polynomial in z = s^2, s^2 <= 0.0295 (weighted 2^-35)
  static TP_HD float log_odd(float z) {
    return fma(fma(fma(0x1.ec1914p-3f, z, 0x1.23f1b0p-2f), z, 0x1.999bd4p-2f), z, 0x1.555554p-1f);
  }
};
template <> struct Format<double> {
  using Bits = unsigned long long;
  using SignedBits = long long;
  static constexpr int kMant = 52;
  static constexpr Bits kBias = 1023, kMantMask = 0x000fffffffffffffull, kSqrtHalf = 0x3fe6a09e667f3bcdull;
  static constexpr double kShifter = 0x1.8p52;
  static constexpr double kMinNormal = 0x1p-1022, kSubnormalScale = 0x1p54, kSubnormalExponent = -54.0;
  static constexpr double kLn2Hi = 0x1.62e42fefa39efp-1, kLn2Lo = 0x1.abc9e3b39803fp-56;
  static constexpr double kLn2Short = 0x1.62e42feep-1, kLn2ShortLo = 0x1.a39ef35793c76p-33;
  static constexpr double kLog2e = 0x1.71547652b82fep+0, kLog2eLo = 0x1.777d0ffda0d24p-56;
  static constexpr double kExpMin = -760.0, kExpMax = 710.0;
  static constexpr double kExpNormal = 700.0;
  static constexpr double kMinExponent = -1022.0;
  static constexpr int kNewtonSteps = 4;
  static constexpr double kExp2Min = -1080.0, kExp2Max = 1025.0;
  static constexpr double kExp2Normal = 1020.0;
  static constexpr double kRsqrtBig = 0x1p900, kRsqrtSmall = 0x1p-900;
  static constexpr double kRsqrtShift = 0x1p200, kRsqrtPost = 0x1p100;
  static TP_HD double exp_cubic(double r) {  // weighted error 2^-63.5
    double p = fma(0x1.1ec4409151176p-29, r, 0x1.af6feb67937dap-26);
    p = fma(p, r, 0x1.27e5504352be4p-22);
    p = fma(p, r, 0x1.71ddedc1aba2fp-19);
    p = fma(p, r, 0x1.a01a016eeb260p-16);
    p = fma(p, r, 0x1.a01a01b47b7e1p-13);
    p = fma(p, r, 0x1.6c16c16c215f0p-10);
    p = fma(p, r, 0x1.111111110e9a6p-7);
    p = fma(p, r, 0x1.555555555553dp-5);
    return fma(p, r, 0x1.555555555555cp-3);
  }
  static TP_HD double log_odd(double z) {  // weighted error 2^-59.4
    double p = fma(0x1.2f3e5a467afefp-3, z, 0x1.399c3125b8575p-3);
    p = fma(p, z, 0x1.746674e09f5e5p-3);
    p = fma(p, z, 0x1.c71c510579b6ep-3);
    p = fma(p, z, 0x1.2492494330978p-2);
    p = fma(p, z, 0x1.999999997e6acp-2);
    return fma(p, z, 0x1.5555555555597p-1);
  }
};

template <class T> TP_HD typename Format<T>::Bits to_bits(T x) { return bits_of(x); }
TP_HD float from_bits(unsigned b) { return float_of(b); }
TP_HD double from_bits(unsigned long long b) { return double_of(b); }

// (hi + lo) * 2^k; k is an integer held in a T
template <class T> struct Value {
  T hi, lo, k;
};
// v where ok, else the exact value `otherwise`: selects on each member (with & and |, not && and
// ||), so that host loops over them have no branch and vectorize
template <class T> TP_HD Value<T> pick_value(bool ok, const Value<T>& v, T otherwise) {
  return {ok ? v.hi : otherwise, ok ? v.lo : T(0), ok ? v.k : T(0)};
}

// hi + lo = a + b exactly, hi = RN(a + b), for |a| >= |b| or a == 0 (Fast2Sum)
template <class T> TP_HD Value<T> fast_two_sum(T a, T b) {
  const T hi = a + b;
  return {hi, b - (hi - a), T(0)};
}
template <class T> TP_HD Value<T> two_sum(T a, T b) {  // the same for any a, b (Knuth)
  const T hi = a + b, bb = hi - a;
  return {hi, (a - (hi - bb)) + (b - bb), T(0)};
}

// An integer k (|k| < 2^22, or 2^51) as a two's-complement integer in Bits
template <class T> TP_HD typename Format<T>::Bits integer_of(T k) {
  return to_bits(k + Format<T>::kShifter) - to_bits(Format<T>::kShifter);
}
// 2^k for an integer k of the normal exponent range, from its bits
template <class T> TP_HD T pow2_of(typename Format<T>::Bits k) {
  return from_bits((k + Format<T>::kBias) << Format<T>::kMant);
}
template <class T> TP_HD T pow2(T k) { return pow2_of<T>(integer_of(k)); }
// v * 2^k rounded once, for k up to twice the exponent range and v within a few powers of two
// of 1: v * 2^floor(k/2) is exact, the second product rounds where the result is subnormal or
// overflows (the halves split in integers: fewer instructions than in floating point)
template <class T> TP_HD T times_pow2(T v, T k) {
  using F = Format<T>;
  using Bits = typename F::Bits;
  const Bits ki = integer_of(k);
  const Bits k1 = static_cast<Bits>(static_cast<typename F::SignedBits>(ki) >> 1);
  return (v * pow2_of<T>(k1)) * pow2_of<T>(ki - k1);
}

// 1/d for d in [lo, hi] to about an ulp: the line alpha - beta d with the least relative error
// e (alpha = beta (lo + hi), beta = 2 / (lo hi + (lo + hi)^2 / 4)), then Newton steps y (2 - d y),
// each squaring the error; cheaper on the GPU than an IEEE division, and as deterministic
// (recursion, not a loop: a loop inside the host's loop over elements would keep it scalar)
template <class T, int kSteps> TP_HD T reciprocal_from_line(T d, T alpha, T beta) {
  if constexpr (kSteps == 0) {
    return fma(-beta, d, alpha);
  } else {
    const T y = reciprocal_from_line<T, kSteps - 1>(d, alpha, beta);
    return fma(y, fma(-d, y, T(1)), y);
  }
}

// e^(a + rho) for |a + rho| <= ln2/2, a exact and rho <= 2^-21 (a + rho's error), r = RN(a + rho):
// 1 + a + rho + r^2 (1/2 + r q(r)), the sum kept as hi + lo, about 2^-27 (2^-56) relative
template <class T> TP_HD Value<T> exp_near_zero(T a, T r, T rho) {
  using F = Format<T>;
  const T small = fma(r * r, fma(r, F::exp_cubic(r), T(0.5)), rho);
  const Value<T> one_a = fast_two_sum(T(1), a);
  return fast_two_sum(one_a.hi, one_a.lo + small);
}

// e^x = e^(a + rho) * 2^k with k = RN(x / ln2), a + rho = x - k ln2 (Cody and Waite: a's fma
// is exact, rho = -k ln2_lo), for x within [kExpMin, kExpMax]; `shifted` is k + kShifter, k in
// its low bits
template <class T> struct ExpParts {
  Value<T> e;
  T shifted;
};
template <class T> TP_HD ExpParts<T> exp_parts(T x) {
  using F = Format<T>;
  const T shifted = fma(x, F::kLog2e, F::kShifter), k = shifted - F::kShifter;
  const T a = fma(-k, F::kLn2Hi, x), rho = -k * F::kLn2Lo;
  Value<T> e = exp_near_zero(a, a + rho, rho);
  e.k = k;
  return {e, shifted};
}
template <class T> TP_HD Value<T> exp_value(T x) {
  using F = Format<T>;
  T xc = x > F::kExpMax ? F::kExpMax : x;
  xc = xc < F::kExpMin ? F::kExpMin : xc;
  return exp_parts(xc).e;  // NaN for a NaN x (the callers make it the canonical NaN)
}
// e^x for |x| <= kExpNormal, where hi (in [sqrt(1/2), sqrt(2)]) times 2^k is normal, so exact:
// k added to hi's exponent bits (those of k + kShifter shift out of the field), with no clamp, no
// NaN and no two-step scaling. The bits of round(exp_value(x)), about 11 instructions fewer.
template <class T> TP_HD T scaled_normal(const ExpParts<T>& p) {
  return from_bits(to_bits(p.e.hi) + (to_bits(p.shifted) << Format<T>::kMant));
}
template <class T> TP_HD T exp_normal(T x) { return scaled_normal(exp_parts(x)); }

// float e^x, faithful (0.90 ulp at most, every float checked), in about 6 instructions fewer than
// exp_value's hi + lo (the rounding of 1 + a + ... dominates; exp_value stays for the ops that need
// e^x's low part): (1 + s) 2^k with k = RN(x / ln2), a = x - k ln2_hi exactly, rho = -k ln2_lo,
// s = a + (rho + r^2 q(r)) for r = RN(a + rho), q a quartic for (e^r - 1 - r) / r^2 on
// |r| <= ln2/2 (weighted error 2^-28.2). `shifted` is k + kShifter, k in its low bits.
struct FloatExpParts {
  float one_plus_s, shifted;
};
TP_HD FloatExpParts float_exp_parts(float x) {
  using F = Format<float>;
  const float shifted = fma(x, F::kLog2e, F::kShifter), k = shifted - F::kShifter;
  const float a = fma(-k, F::kLn2Hi, x), rho = -k * F::kLn2Lo, r = a + rho;
  const float q = fma(fma(fma(fma(0x1.6db404p-10f, r, 0x1.123b48p-7f), r, 0x1.55545ep-5f), r, 0x1.55548ep-3f), r, 0.5f);
  return {1.0f + (a + fma(r * r, q, rho)), shifted};
}
// e^x rounded: clamped where it is 0 or inf, a subnormal result rounding once more (0.82 ulp)
TP_HD float float_exp(float x) {
  using F = Format<float>;
  float xc = x > F::kExpMax ? F::kExpMax : x;
  xc = xc < F::kExpMin ? F::kExpMin : xc;
  const FloatExpParts p = float_exp_parts(xc);
  return times_pow2(p.one_plus_s, p.shifted - F::kShifter);  // NaN for a NaN x
}
// e^x for |x| <= kExpNormal, where (1 + s) 2^k is normal: k added to the exponent bits (those of
// k + kShifter shift out of the field), float_exp's bits with no clamp and no two-step scaling.
// An overload, so float takes it rather than the template's hi + lo form below.
TP_HD float exp_normal(float x) {
  const FloatExpParts p = float_exp_parts(x);
  return from_bits(to_bits(p.one_plus_s) + (to_bits(p.shifted) << Format<float>::kMant));
}

// 2^x = e^(t ln2) * 2^k with k = RN(x), t = x - k exact, t ln2 = y + rho, for x within
// [kExp2Min, kExp2Max]
template <class T> TP_HD ExpParts<T> exp2_parts(T x) {
  using F = Format<T>;
  const T shifted = x + F::kShifter, k = shifted - F::kShifter;
  const T t = x - k, y = t * F::kLn2Hi;
  Value<T> e = exp_near_zero(y, y, fma(t, F::kLn2Hi, -y) + t * F::kLn2Lo);
  e.k = k;
  return {e, shifted};
}
template <class T> TP_HD Value<T> exp2_value(T x) {
  using F = Format<T>;
  T xc = x > F::kExp2Max ? F::kExp2Max : x;
  xc = xc < F::kExp2Min ? F::kExp2Min : xc;
  return exp2_parts(xc).e;  // NaN for a NaN x
}
// 2^x for |x| <= kExp2Normal, as exp_normal: the bits of round(exp2_value(x))
template <class T> TP_HD T exp2_normal(T x) { return scaled_normal(exp2_parts(x)); }

// log x = k ln2 + log(1 + f) with x = 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)); log(1 + f) =
// f - f^2/2 + s (f^2/2 + R(s^2)), s = f / (2 + f) (fdlibm's split), as f (exact) plus `lo`
template <class T> struct LogParts {
  T k;
  Value<T> log1p;  // k = 0
};
template <class T> TP_HD LogParts<T> log_parts(T x) {  // x > 0 finite
  using F = Format<T>;
  using Bits = typename F::Bits;
  const bool subnormal = x < F::kMinNormal;
  const Bits ix = to_bits(subnormal ? x * F::kSubnormalScale : x) + (to_bits(T(1)) - F::kSqrtHalf);
  const T k = (from_bits(to_bits(F::kShifter) + (ix >> F::kMant) - F::kBias) - F::kShifter) +
              (subnormal ? F::kSubnormalExponent : T(0));
  const T f = from_bits((ix & F::kMantMask) + F::kSqrtHalf) - T(1);
  const T half_f = T(0.5) * f, hfsq = half_f * f, hfsq_err = fma(half_f, f, -hfsq);  // f^2/2 exactly
  // s = (f/2) / (1 + f/2), 1 + f/2 in [0.853, 1.208], where the line is 1/67 off
  const T s = half_f * reciprocal_from_line<T, F::kNewtonSteps>(T(1) + half_f, T(0x1.f859fb1e833f6p+0),
                                                                      T(0x1.e981385f30266p-1));
  const T z = s * s;
  const T odd = s * (hfsq + z * F::log_odd(z));
  const Value<T> main = fast_two_sum(f, -hfsq);
  return {k, fast_two_sum(main.hi, main.lo + (odd - hfsq_err))};
}
// log's specials: NaN and x < 0 give NaN, +-0 -inf, +inf itself
template <class T> TP_HD Value<T> log_special(T x, const Value<T>& v) {
  const T special = x > T(0) ? x : (x == T(0) ? limits<T>::neg_inf() : limits<T>::quiet_nan());
  return pick_value((x > T(0)) & (x < limits<T>::pos_inf()), v, special);
}

template <class T> TP_HD Value<T> log_value(T x) {
  using F = Format<T>;
  const LogParts<T> p = log_parts(x);
  const Value<T> s = fast_two_sum(p.k * F::kLn2Short, p.log1p.hi);  // the product is exact
  return log_special(x, fast_two_sum(s.hi, (s.lo + p.log1p.lo) + p.k * F::kLn2ShortLo));
}

template <class T> TP_HD Value<T> log2_value(T x) {
  using F = Format<T>;
  const LogParts<T> p = log_parts(x);
  const T y = p.log1p.hi * F::kLog2e;  // (hi + lo) / ln2, the product's error kept
  const T y_lo = fma(p.log1p.hi, F::kLog2e, -y) + (p.log1p.lo * F::kLog2e + p.log1p.hi * F::kLog2eLo);
  const Value<T> s = fast_two_sum(p.k, y);
  return log_special(x, fast_two_sum(s.hi, s.lo + y_lo));
}

// 1/sqrt(x): y0 = 1/sqrt(x) (two roundings), then one Newton step y0 (1 + r/2) on the residual
// r = 1 - x y0^2, computed nearly exactly with fma; x scaled by an even power of two so that y0^2
// stays normal
template <class T> TP_HD Value<T> rsqrt_value(T x) {
  using F = Format<T>;
  const bool big = x > F::kRsqrtBig, small = x < F::kRsqrtSmall;
  const T xs = x * (small ? F::kRsqrtShift : (big ? T(1) / F::kRsqrtShift : T(1)));
  const T post = small ? F::kRsqrtPost : (big ? T(1) / F::kRsqrtPost : T(1));
  const T y0 = T(1) / sqrt(xs), h = y0 * y0;
  const T r = fma(-xs, fma(y0, y0, -h), fma(-xs, h, T(1)));
  const T half_y0 = T(0.5) * y0, y = fma(half_y0, r, y0);
  const Value<T> v{y * post, fma(half_y0, r, y0 - y) * post, T(0)};
  // +-0 -> +-inf, +inf -> +0, x < 0 and NaN -> NaN: what y0 already is, NaN made canonical
  const T special = is_nan(y0) ? limits<T>::quiet_nan() : y0;
  return pick_value((x > T(0)) & (x < limits<T>::pos_inf()), v, special);
}

// silu x = x sigmoid(x) = n / d with e = e^-|x|, d = 1 + e, n = x (x >= 0) or x e (x < 0, so
// nothing overflows): n and d carried exactly as pairs, the quotient n (1/d) corrected by its
// remainder.
// For x < 0 the 2^k of e stays outside until the end, so subnormal results round once.
template <class T> TP_HD Value<T> silu_value(T x) {
  using F = Format<T>;
  const bool negative = x < T(0);
  const T a = negative ? (x < F::kExpMin ? F::kExpMin : x) : -x;  // -|x|, kept where e^a > 0
  const Value<T> e = exp_value(a);
  // below 2^kMinExponent e no longer counts beside 1: one scaling, its 2^k clamped
  const T scale = pow2(e.k < F::kMinExponent ? F::kMinExponent : e.k);
  const Value<T> d = fast_two_sum(T(1), e.hi * scale);
  const T d_lo = d.lo + e.lo * scale;
  const T n = negative ? a * e.hi : x;
  const T n_lo = negative ? fma(a, e.hi, -n) + a * e.lo : T(0);
  const T inv = reciprocal_from_line<T, F::kNewtonSteps>(d.hi, T(24.0 / 17), T(8.0 / 17)), q = n * inv;
  const T c = ((fma(-q, d.hi, n) + n_lo) - q * d_lo) * inv;
  Value<T> v = fast_two_sum(q, c);
  v.k = negative ? e.k : T(0);
  // NaN; +inf; +-0 keeps its sign (-inf has a = kExpMin and comes out -0)
  const T special = is_nan(x) ? limits<T>::quiet_nan() : x;
  return pick_value(!(is_nan(x) | (x == limits<T>::pos_inf()) | (x == T(0))), v, special);
}

template <class T> TP_HD T canonical_nan(T r) { return is_nan(r) ? limits<T>::quiet_nan() : r; }

// The value rounded: hi * 2^k, one rounding where that is normal; a subnormal result rounds hi
// again (at most 0.81 ulp, measured)
template <class T> TP_HD T round(const Value<T>& v) { return times_pow2(v.hi, v.k); }

}  // namespace ieee_math

// float and double: the Value rounded (log, log2 and rsqrt have no 2^k). A NaN result is the
// canonical NaN on both backends (a NaN input's payload survives the host's arithmetic, not the
// GPU's): a select on the result, so the GPU branches on nothing per element (a test of the input
// made each element's computation a branch of its own, about 7 more instructions each)
#define TP_WIDE_TRANSCENDENTAL(op, rounded)                                                   \
  TP_HD float op(float x) { return ieee_math::canonical_nan(rounded(op, x)); }                \
  TP_HD double op(double x) { return ieee_math::canonical_nan(rounded(op, x)); }
#define TP_SCALED(op, x) ieee_math::round(ieee_math::op##_value(x))
#define TP_UNSCALED(op, x) ieee_math::op##_value(x).hi
TP_HD float exp(float x) { return ieee_math::canonical_nan(ieee_math::float_exp(x)); }  // faithful, shorter
TP_HD double exp(double x) { return ieee_math::canonical_nan(TP_SCALED(exp, x)); }
TP_WIDE_TRANSCENDENTAL(exp2, TP_SCALED)
TP_WIDE_TRANSCENDENTAL(silu, TP_SCALED)
TP_WIDE_TRANSCENDENTAL(log, TP_UNSCALED)
TP_WIDE_TRANSCENDENTAL(log2, TP_UNSCALED)
TP_WIDE_TRANSCENDENTAL(rsqrt, TP_UNSCALED)
#undef TP_WIDE_TRANSCENDENTAL
#undef TP_SCALED
#undef TP_UNSCALED

// exp and exp2 where every result is normal (|x| within kExpNormal, kExp2Normal): 2^k an add to
// the exponent, the bits of exp and exp2 (the maps choose these per bundle: elementwise/maps.cuh)
#define TP_WIDE_NORMAL_FORMS(T)                                                                    \
  TP_HD bool exp_fits_normal(T x) { return magnitude(x) <= ieee_math::Format<T>::kExpNormal; }   \
  TP_HD T exp_normal(T x) { return ieee_math::exp_normal(x); }                                \
  TP_HD bool exp2_fits_normal(T x) { return magnitude(x) <= ieee_math::Format<T>::kExp2Normal; } \
  TP_HD T exp2_normal(T x) { return ieee_math::exp2_normal(x); }
TP_WIDE_NORMAL_FORMS(float)
TP_WIDE_NORMAL_FORMS(double)
#undef TP_WIDE_NORMAL_FORMS

// The 16-bit types on both backends, each op rounded once from a wider result (a NaN becomes the
// canonical NaN in the conversion): sqrt in float,
// division in Wide (float for half; double for bfloat16, whose quotients can be float
// subnormals, where float's rounding is not fine enough), both then correctly rounded since
// their precision is at least 2p + 2; the transcendentals from transcendental16.cuh's float
// results for Format16 (ieee_math16::Half or BFloat16), correct over every input (checked);
// exp, exp2, log and log2 also in their normal range alone (*_fits_normal), with the same bits.
// H needs widen(H) and convert_to<H>.
#define TP_SIXTEEN_BIT_THROUGH_FLOAT(H, Wide, Format16)                                        \
  TP_HD H sqrt(H x) { return convert_to<H>::from(sqrt(widen(x))); }                             \
  TP_HD H fdiv(H a, H b) { return convert_to<H>::from(Wide(widen(a)) / Wide(widen(b))); }      \
  TP_HD H reciprocal(H x) { return convert_to<H>::from(Wide(1) / Wide(widen(x))); }             \
  TP_HD H exp(H x) { return convert_to<H>::from(ieee_math16::exp<Format16>(widen(x))); }        \
  TP_HD H exp2(H x) { return convert_to<H>::from(ieee_math16::exp2<Format16>(widen(x))); }      \
  TP_HD H log(H x) { return convert_to<H>::from(ieee_math16::log<Format16>(widen(x))); }        \
  TP_HD H log2(H x) { return convert_to<H>::from(ieee_math16::log2<Format16>(widen(x))); }      \
  TP_HD H rsqrt(H x) { return convert_to<H>::from(ieee_math16::rsqrt<Format16>(widen(x))); }    \
  TP_HD H silu(H x) { return convert_to<H>::from(ieee_math16::silu<Format16>(widen(x))); }      \
  TP_HD bool exp_fits_normal(H x) { return magnitude(widen(x)) <= Format16::kExpNormal; }        \
  TP_HD H exp_normal(H x) { return convert_to<H>::from(ieee_math16::exp_normal<Format16>(widen(x))); } \
  TP_HD bool exp2_fits_normal(H x) { return magnitude(widen(x)) <= Format16::kExp2Normal; }      \
  TP_HD H exp2_normal(H x) { return convert_to<H>::from(ieee_math16::exp2_normal<Format16>(widen(x))); } \
  TP_HD bool log_fits_normal(H x) {                                                              \
    return (widen(x) >= Format16::kLogNormal) & (widen(x) <= 0x1.fffffep127f);                   \
  }                                                                                              \
  TP_HD bool log2_fits_normal(H x) { return log_fits_normal(x); }                                 \
  TP_HD H log_normal(H x) { return convert_to<H>::from(ieee_math16::log_normal<Format16>(widen(x))); } \
  TP_HD H log2_normal(H x) { return convert_to<H>::from(ieee_math16::log2_normal<Format16>(widen(x))); }

}  // namespace tp

#include "transcendental16.cuh"
