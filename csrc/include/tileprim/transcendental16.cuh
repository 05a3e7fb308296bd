// exp, exp2, log, log2, rsqrt and silu for float16 and bfloat16: a float range reduction and a
// short polynomial, rounded once to the 16-bit format, in IEEE-rounded operations only (the CPU
// backend instantiates these same functions, so both backends give the same bits).
//
// Why float suffices: a 16-bit input has only 11 (8) significant bits, so the reductions below are
// exact where they must be, and every inexact result lies at least 2^-26.8 of itself (float16;
// bfloat16 2^-25.1) from a 16-bit rounding midpoint, silu's tiny inputs aside (there the lo terms
// are exact). So hi + lo, hi a float, errs by less than that (the polynomials are as short as that
// allows), and hi + lo rounded to odd (`sum_to_odd`) rounds as the exact result does. rsqrt needs no
// lo: its results lie at least 2^-21.4 from a midpoint, its float Newton steps err by 2^-23.
// silu (and activation.cuh's 16-bit sigmoid) first evaluate in plain float, and keep that result
// where it lies farther from a midpoint than its error bound (the logistic fast path, below).
// Correctly rounded at every one of the 65,536 inputs of each format: tests/test_numerics.py.
//
// Included by transcendental.cuh, whose Value and bit moves it uses.
#pragma once

namespace tp {
namespace ieee_math16 {

using ieee_math::from_bits;
using ieee_math::to_bits;
using Value = ieee_math::Value<float>;

constexpr float kShifter = 0x1.8p23f;  // v + kShifter rounds |v| < 2^22 to an integer
constexpr unsigned kOne = 0x3f800000u;  // 1.0f's bits

// c0 + x (c1 + x (c2 + ...)) by Horner's rule, one fma a coefficient from the highest down
TP_HD float horner(float, float c0) { return c0; }
template <class... C> TP_HD float horner(float x, float c0, C... c) { return fma(horner(x, c...), x, c0); }

// (e^r - 1 - r) / r^2 on |r| <= ln2/2, error 2^-18.6; (2^t - 1 - t ln2) / t^2 on |t| <= 1/2,
// error 2^-19.7: a degree less misses float16 inputs
TP_HD float exp_q(float r) { return horner(r, 0x1.ffff58p-2f, 0x1.555494p-3f, 0x1.56b3b4p-5f, 0x1.123e00p-7f); }
TP_HD float exp2_q(float t) { return horner(t, 0x1.ebfb3ep-3f, 0x1.c6af8cp-5f, 0x1.3c6e68p-7f, 0x1.5f091ep-10f); }

// e^r on |r| <= ln2/2, relative error 2^-22.8: the logistic fast path's (below), both formats'
TP_HD float exp_near_zero(float r) {
  return horner(r, 0x1.000002p+0f, 0x1.fffff6p-1f, 0x1.fffd1ap-2f, 0x1.555a18p-3f, 0x1.575f08p-5f, 0x1.0fe5b8p-7f);
}

// (log(1 + f) - f) / f^2 and (log2(1 + f) - f log2e) / f^2 on f in [sqrt(1/2) - 1, sqrt(2) - 1],
// errors 2^-22.6 and 2^-19.4: a degree less misses float16 inputs
TP_HD float log_q(float f) {
  return horner(f, -0x1.fffffcp-2f, 0x1.55561ep-2f, -0x1.00052ap-2f, 0x1.991574p-3f, -0x1.533940p-3f, 0x1.2e8c5ep-3f,
                -0x1.25bc0cp-3f, 0x1.79c2e2p-4f);
}
TP_HD float log2_q(float f) {
  return horner(f, -0x1.71549cp-1f, 0x1.ec7558p-2f, -0x1.711a78p-2f, 0x1.261a38p-2f, -0x1.f8525ep-3f, 0x1.ddd58ap-3f,
                -0x1.3bbff6p-3f);
}

// bfloat16's shorter polynomials for the same three (its 8 bits ask less): f^2 q(f) errs by 2^-19.0
// (log), 2^-15.4 (log2: fitted, then its coefficients moved by a few float ulps until every input
// rounded correctly) and t^2 q(t) by 2^-17.5 (exp2); every bfloat16 input still rounds correctly
// (tests/test_numerics.py). exp's has no shorter form that does.
TP_HD float log_q_bf16(float f) {
  return horner(f, -0x1.ffdf34p-2f, 0x1.549b64p-2f, -0x1.04b3fcp-2f, 0x1.c3ffc2p-3f, -0x1.20d87ep-3f);
}
TP_HD float log2_q_bf16(float f) {
  return horner(f, -0x1.712df6p-1f, 0x1.eb7156p-2f, -0x1.780a0cp-2f, 0x1.460546p-2f, -0x1.a0a774p-3f);
}
TP_HD float exp2_q_bf16(float t) { return horner(t, 0x1.ebf93cp-3f, 0x1.c911b4p-5f, 0x1.3d1762p-7f); }

// What the maps need to know of each format: inputs at or below kExpZero (kExp2Zero) give 0, at
// or above kExpInf (kExp2Inf) infinity, after the rounding (clamping there keeps 2^k a float);
// whether results and inputs can be float subnormals (bfloat16's exponent range is float's).
// Within kExpNormal (kExp2Normal) of 0, x needs no clamp and 2^k is one exact product (the normal
// forms below); kLogNormal is the least x whose log needs neither specials nor scaling.
struct Half {
  static constexpr float kExpZero = -17.5f, kExpInf = 11.125f;  // e^-17.5 < 2^-25, e^11.125 > 65520
  static constexpr float kExp2Zero = -25.0f, kExp2Inf = 16.0f;  // 2^-25 is a tie, rounded to 0
  static constexpr float kExpNormal = 11.0f, kExp2Normal = 15.0f;
  static constexpr float kLogNormal = 0x1p-24f;  // every positive float16
  static constexpr float kSiluZero = -21.5f, kSiluInf = 65536.0f;  // 21.5 e^-21.5 < 2^-25
  static constexpr bool kFloatSubnormals = false;
  // the logistic fast path (below): e^m's 2^k unshifted (k >= -31); a result y is checked as
  // y 2^-112, whose 13 low bits are those float16's rounding drops, in its subnormal range too
  // (float16's 2^-24 grid becomes 2^-136, 13 bits above float's least subnormal); margin 4 ulps
  // against the largest error over every float16 input, 3.998 (the first-order bound below is 9.5;
  // every input is checked, tests/test_logistic16.py, and a float16 input has no others)
  static constexpr float kPow2Offset = 0.0f, kUnoffset = 1.0f, kToCheck = 0x1p-112f;
  static constexpr unsigned kLowBits = 0x1fffu, kMargin = 4u;
  static TP_HD float exp2_q(float t) { return ieee_math16::exp2_q(t); }
  static TP_HD float log_q(float f) { return ieee_math16::log_q(f); }
  static TP_HD float log2_q(float f) { return ieee_math16::log2_q(f); }
};
struct BFloat16 {
  static constexpr float kExpZero = -93.0f, kExpInf = 89.0f;    // e^-93 < 2^-134, e^89 > 2^128
  static constexpr float kExp2Zero = -134.0f, kExp2Inf = 128.0f;
  static constexpr float kExpNormal = 86.0f, kExp2Normal = 124.0f;  // 2^k within [2^-124, 2^124]
  static constexpr float kLogNormal = 0x1p-126f;  // float's least normal
  static constexpr float kSiluZero = -98.0f, kSiluInf = 0x1.fffffep127f;  // float's max: bfloat16's inf
  static constexpr bool kFloatSubnormals = true;
  // the logistic fast path: 2^(k + 15) one exact product for every k >= -141 (e^-98's), 2^-15 the
  // one rounding of a float subnormal; bfloat16's rounding drops a result's 16 low bits, float
  // subnormals included (bfloat16's are float's); margin 8 ulps against the largest error over
  // every bfloat16 input, 5.02 (the first-order bound below is 13.0; every input is checked)
  static constexpr float kPow2Offset = 15.0f, kUnoffset = 0x1p-15f, kToCheck = 1.0f;
  static constexpr unsigned kLowBits = 0xffffu, kMargin = 8u;
  static TP_HD float exp2_q(float t) { return exp2_q_bf16(t); }
  static TP_HD float log_q(float f) { return log_q_bf16(f); }
  static TP_HD float log2_q(float f) { return log2_q_bf16(f); }
};

// x clamped to (zero - 1, inf): whatever rounds to 0 moves 1 below `zero`, past a result that
// ties; a NaN stays NaN (selects, not fminf)
TP_HD float clamp(float x, float zero, float inf) {
  const float below = x > inf ? inf : x;
  return below <= zero ? zero - 1.0f : below;
}

// A + B + small as hi + lo, A and B exact, |A| >= |B| or A = 0, |small| < |B|: A + B is summed
// exactly (Fast2Sum), then small joins its error
TP_HD Value sum3(float a, float b, float small) {
  const float s = a + b, t = (b - (s - a)) + small, hi = s + t;
  return {hi, t - (hi - s), 0.0f};
}

// 1 + w as hi + lo, hi = RN(1 + w) and lo its error, exactly (Fast2Sum: |w| < 1)
TP_HD Value one_plus(float w) {
  const float hi = 1.0f + w;
  return {hi, w - (hi - 1.0f), 0.0f};
}

// hi moved one float ulp toward hi + lo where hi's last bit is 0, else hi (rounding to odd, as
// sum_to_odd, but for an exact sum below zero, which moves toward zero: silu's of a negative
// subnormal x, whose result x/2 is a bfloat16 midpoint and the exact silu just above it).
TP_HD float nudged(const Value& v) {
  const unsigned b = to_bits(v.hi);
  const unsigned toward_zero = static_cast<unsigned>(static_cast<int>(to_bits(v.lo) ^ b) >> 31);  // 0 or ~0
  return from_bits((b + toward_zero) | 1u);
}

// a + b rounded to odd: toward zero, then its last bit set (Boldo and Melquiond's rounding to
// odd, but for an exact sum, whose last bit is set too). A 16-bit midpoint is a float with its
// last bit 0, so the result is never one, and it rounds to 16 bits as a + b does: where a + b lies
// within one float ulp of a midpoint, to its side of it. On the GPU one add rounded toward zero
// and an or; on the host RN(a + b) moved one ulp toward zero where it erred away from zero (its
// error exact, for |a| >= |b| or a = 0: Fast2Sum), the same float. NaN stays NaN.
TP_HD float sum_to_odd(float a, float b) {
#if TP_ON_DEVICE
  return from_bits(to_bits(__fadd_rz(a, b)) | 1u);
#else
  const float hi = a + b, lo = b - (hi - a);
  const bool away = (lo != 0.0f) & (sign_bit(lo) != sign_bit(hi));
  return from_bits((to_bits(hi) - (away ? 1u : 0u)) | 1u);
#endif
}

// A + B + small rounded to odd: sum3's hi + lo, with A + B exact as there
TP_HD float sum3_to_odd(float a, float b, float small) {
  const float s = a + b;
  return sum_to_odd(s, (b - (s - a)) + small);
}

// 2^k for an integer k in [-126, 127], from its bits
TP_HD int exponent_of(float k) { return static_cast<int>(to_bits(k + kShifter) - to_bits(kShifter)); }
TP_HD float pow2(int k) { return from_bits((static_cast<unsigned>(k) << 23) + kOne); }

// 2^k for k in [-126, 127] held as shifted = k + kShifter (k in its low bits; the bits above it
// shift out)
TP_HD float pow2_of_shifted(float shifted) { return from_bits((to_bits(shifted) << 23) + kOne); }

// v * 2^k for the integer k held in shifted, v within a few powers of two of 1: one exact product
// for float16 (k in [-38, 23]); for bfloat16 two (2^floor(k/2), 2^ceil(k/2): k reaches -141 and
// 128), the second rounding where the product is a float subnormal. A NaN v stays NaN.
template <class F> TP_HD float times_pow2(float v, float shifted) {
  if constexpr (F::kFloatSubnormals) {
    const int ki = static_cast<int>(to_bits(shifted) - to_bits(kShifter));
    return (v * pow2(ki >> 1)) * pow2(ki - (ki >> 1));
  } else {
    return v * pow2_of_shifted(shifted);
  }
}

// e^x = (1 + a + small) 2^k for x in the clamp's range: k = RN(x / ln2), a = x - k ln2_f exactly
// (|a| <= ln2/2 is a multiple of 2^-24, as x and k ln2_f are), small = a^2 q(a). ln2_f's own
// error, k (ln2 - ln2_f), at most 2^-21.9 relative (bfloat16's k; float16's 2^-24.3), is left
// out: checked harmless. `shifted` is k + kShifter, k in its low bits.
struct ExpParts {
  float shifted, k, a, small;
};
TP_HD ExpParts exp_parts(float x) {
  const float shifted = fma(x, 0x1.715476p+0f, kShifter), k = shifted - kShifter;
  const float a = fma(k, -0x1.62e430p-1f, x);
  return {shifted, k, a, a * a * exp_q(a)};
}

TP_HD float exp_rounded_to_odd(const ExpParts& e) { return sum_to_odd(1.0f, e.a + e.small); }
template <class F> TP_HD float exp(float x) {
  const ExpParts e = exp_parts(clamp(x, F::kExpZero, F::kExpInf));
  return times_pow2<F>(exp_rounded_to_odd(e), e.shifted);
}
// e^x for |x| <= F::kExpNormal: exp's bits without its clamp (the identity there) and with 2^k one
// exact product (bfloat16's two products are exact there too)
template <class F> TP_HD float exp_normal(float x) {
  const ExpParts e = exp_parts(x);
  return exp_rounded_to_odd(e) * pow2_of_shifted(e.shifted);
}

// 2^x = (1 + t ln2 + t^2 q(t)) 2^k with k = RN(x), t = x - k exactly (11 bits at most); t ln2 =
// t L1 + t L2, L1 = ln2 to 12 bits, so t L1 is exact
struct Exp2Parts {
  float shifted, odd;  // k + kShifter, 1 + t ln2 + t^2 q(t) rounded to odd
};
template <class F> TP_HD Exp2Parts exp2_parts(float x) {
  const float shifted = x + kShifter, t = x - (shifted - kShifter);
  const float w = t * 0x1.62ep-1f + fma(t * t, F::exp2_q(t), t * 0x1.0bfbe8p-15f);
  return {shifted, sum_to_odd(1.0f, w)};
}
template <class F> TP_HD float exp2(float x) {
  const Exp2Parts e = exp2_parts<F>(clamp(x, F::kExp2Zero, F::kExp2Inf));
  return times_pow2<F>(e.odd, e.shifted);
}
// 2^x for |x| <= F::kExp2Normal, as exp_normal
template <class F> TP_HD float exp2_normal(float x) {
  const Exp2Parts e = exp2_parts<F>(x);
  return e.odd * pow2_of_shifted(e.shifted);
}

// silu x = x / (1 + e) (x >= 0) or x e / (1 + e) (x < 0), e = e^-|x| = (hi + lo) 2^k: numerator n
// and denominator d carried as pairs, the quotient n (1/d) corrected by its remainder; for x < 0
// the 2^k joins at the end, so a result that is a float subnormal rounds once more only there.
// The slow path of `silu` below (out of line on the GPU: a rare branch)
template <class F> TP_HD_OUT_OF_LINE float silu_exact(float x) {
  const float xc = x > F::kSiluInf ? F::kSiluInf : x;  // +inf: a finite x that rounds to infinity
  const bool negative = xc < 0.0f;
  const float minus_abs = negative ? xc : -xc;
  const float a = minus_abs < F::kSiluZero ? F::kSiluZero : minus_abs;  // -inf: a rounds to -0
  const ExpParts parts = exp_parts(a);  // 1 + a + small summed exactly but for small's rounding
  Value e = sum3(1.0f, parts.a, parts.small);
  e.k = parts.k;
  float k_d = e.k;  // e's 2^k in d; for bfloat16 e beside 1 counts no more below 2^-126
  if constexpr (F::kFloatSubnormals) k_d = k_d < -126.0f ? -126.0f : k_d;
  const float scale = pow2(exponent_of(k_d));
  const Value d = one_plus(e.hi * scale);
  const float d_lo = d.lo + e.lo * scale;
  const float ae = a * e.hi, ae_lo = fma(a, e.hi, -ae) + a * e.lo;
  const float n = negative ? ae : xc, n_lo = negative ? ae_lo : 0.0f;
  const float inv = ieee_math::reciprocal_from_line<float, 3>(d.hi, 24.0f / 17, 8.0f / 17), q = n * inv;
  const float c = ((fma(-q, d.hi, n) + n_lo) - q * d_lo) * inv, hi = q + c;
  const float v = times_pow2<F>(nudged({hi, c - (hi - q), 0.0f}), negative ? parts.shifted : kShifter);
  return x == 0.0f ? x : v;  // +-0 keeps its sign
}

// 1/d for d in [1, 2]: the line 24/17 - 8/17 d (within 1/17), a third-order step y (1 + h + h^2)
// (h = 1 - d y; error h^3, 2^-12.3), a Newton step y (1 + h) (2^-24.6, then its rounding)
TP_HD float reciprocal_in_one_two(float d) {
  const float y0 = fma(-8.0f / 17, d, 24.0f / 17), h0 = fma(-d, y0, 1.0f);
  const float y1 = fma(y0, fma(h0, h0, h0), y0);
  return fma(y1, fma(-d, y1, 1.0f), y1);
}

// The logistic fast path, silu's and sigmoid's: their quotients in plain float. e^m = p 2^k for
// m = -|x| clamped where the result rounds to 0 (k = RN(m / ln2), r = m - k ln2_f exact, p =
// exp_near_zero(r)), d = RN(1 + e^m), y = n (1/d) rounded, times 2^k for x < 0 where n holds p
// only (bfloat16: 2^k as 2^(k + kPow2Offset) kUnoffset). Error bound, in units of 2^-24 relative,
// first order: e^m's (p's fit 2.3, Horner's roundings 1.5, ln2_f's
// k (ln2 - ln2_f) 1.0 for float16's k >= -31 / 4.5 for bfloat16's k >= -141) reaches y with the
// weight 1 / (1 + e^m) <= 1 (d's share of it offsets n's), plus d's, n's and y's roundings (1
// each) and 1/d's 1.7: 9.5 (float16), 13.0 (bfloat16). A y in [2^e, 2^(e+1)) then lies within
// 9.5 (13.0) float ulps 2^(e-23) of the exact result, a float-subnormal one within 27.7 of 2^-149,
// plus 0.5 for a product that rounds a subnormal. So where y's low bits (the check value's, see
// kToCheck) lie at least F::kMargin ulps from the 16-bit rounding midpoint (a power of two's
// nearest midpoints are thousands away), the exact result lies on y's side of every midpoint and
// rounds as y does; elsewhere (tiny |x|, whose x/2 can be a midpoint, and ~0.1 % near one) the
// caller takes its exact path. Fast at 99.7 % (float16) and 99.6 % (bfloat16) of silu's 65,536
// inputs, sigmoid's 99.94 % and 99.99 % (tests/test_logistic16.py re-implements the decision and
// counts, and measures the largest error, which the margin exceeds). The polynomial and the margin
// are sized by what a miss costs: its whole warp takes the exact path (~95 instructions a turn
// against a bundle's ~250), so a margin of 64 ulps (and a degree less) missed at 0.5 % of
// normally distributed bfloat16 inputs and ran 25 % slower than at 0.01 % (an H200).
// NaN gives NaN (through the numerator), +-0 itself, +-inf their limits.
struct Logistic {
  float m, p, scale, d;  // m = -|x| clamped, e^m = p scale kUnoffset, d = RN(1 + e^m)
};
template <class F> TP_HD Logistic logistic(float m) {
  const float offset_shifter = kShifter + F::kPow2Offset;
  const float shifted = fma(m, 0x1.715476p+0f, offset_shifter), k = shifted - offset_shifter;
  const float p = exp_near_zero(fma(k, -0x1.62e430p-1f, m)), scale = pow2_of_shifted(shifted);
  return {m, p, scale, 1.0f + (p * scale) * F::kUnoffset};
}
// y = n (1/d), n = c e^m for x < 0, else `positive`: float16's e^m is one exact product and joins
// n, bfloat16's 2^k joins y at the end
template <class F> TP_HD float logistic_quotient(float x, float c, float positive, const Logistic& l) {
  const float inv = reciprocal_in_one_two(l.d);
  if constexpr (F::kPow2Offset == 0.0f) {
    return (x < 0.0f ? c * (l.p * l.scale) : positive) * inv;
  } else {
    const float q = (x < 0.0f ? c * l.p : positive) * inv;
    return x < 0.0f ? (q * l.scale) * F::kUnoffset : q;
  }
}
// whether y's low bits lie outside [midpoint - kMargin, midpoint + kMargin): an add and an and
template <class F> TP_HD bool rounds_as_exact(float y) {
  constexpr unsigned kMidpoint = (F::kLowBits >> 1) + 1u, kOutside = F::kLowBits & ~(2u * F::kMargin - 1u);
  return ((to_bits(y * F::kToCheck) + (F::kMargin - kMidpoint)) & kOutside) != 0u;
}

// silu's estimate: n = x, or m e^m for x < 0 (m = x but where the result rounds to 0); it rounds
// as silu does where rounds_as_exact<F> says so (the host's path; the GPU's
// maps estimate with the fast forms instead: elementwise/estimated.cuh)
template <class F> TP_HD float silu_estimate(float x) {
  const Logistic l = logistic<F>(max_num(-magnitude(x), F::kSiluZero));  // NaN: n = x keeps it
  return logistic_quotient<F>(x, l.m, x, l);
}
template <class F> TP_HD float silu(float x) {
  const float y = silu_estimate<F>(x);
  return rounds_as_exact<F>(y) ? y : silu_exact<F>(x);
}

// x = 2^k (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)); f = m - 1 is exact and has at most 10
// significant bits (m is x's significand), so f^2 is exact too. x > 0 finite; split_normal's x a
// normal float.
struct Split {
  float k, f;
};
TP_HD Split split_normal(float x) {
  constexpr unsigned kSqrtHalf = 0x3f3504f3u;
  const unsigned ix = to_bits(x) - kSqrtHalf;
  const unsigned k_bits = to_bits(kShifter) + static_cast<unsigned>(static_cast<int>(ix) >> 23);
  return {from_bits(k_bits) - kShifter, from_bits((ix & 0x007fffffu) + kSqrtHalf) - 1.0f};
}
template <class F> TP_HD Split split(float x) {
  if constexpr (F::kFloatSubnormals) {  // bfloat16's subnormals are float's: made normal first
    const bool subnormal = x < 0x1p-126f;
    Split s = split_normal(subnormal ? x * 0x1p24f : x);
    s.k = s.k + (subnormal ? -24.0f : 0.0f);
    return s;
  } else {
    return split_normal(x);
  }
}

// log's specials: +-0 -> -inf, x < 0 and NaN -> NaN, +inf -> +inf
TP_HD float log_special(float x, float v) {
  const float finite = x < limits<float>::pos_inf() ? v : x;
  const float zero = x == 0.0f ? limits<float>::neg_inf() : finite;
  return x < 0.0f ? limits<float>::quiet_nan() : zero;
}

// log x = k ln2 + f + f^2 q(f): k L1 exact (L1 = ln2 to 15 bits), L2 = ln2 - L1
template <class F> TP_HD float log_of(const Split& s) {
  return sum3_to_odd(s.k * 0x1.62e4p-1f, s.f, fma(s.f * s.f, F::log_q(s.f), s.k * 0x1.7f7d1cp-20f));
}
template <class F> TP_HD float log(float x) { return log_special(x, log_of<F>(split<F>(x))); }
// log2 x = k + f log2e + f^2 q2(f): f E1 exact (E1 = log2e to 12 bits), E2 = log2e - E1
template <class F> TP_HD float log2_of(const Split& s) {
  return sum3_to_odd(s.k, s.f * 0x1.715p+0f, fma(s.f * s.f, F::log2_q(s.f), s.f * 0x1.1d94aep-14f));
}
template <class F> TP_HD float log2(float x) { return log_special(x, log2_of<F>(split<F>(x))); }
// log and log2 of x in [F::kLogNormal, float's max]: their bits without the specials and the
// scaling of subnormals (both the identity there)
template <class F> TP_HD float log_normal(float x) { return log_of<F>(split_normal(x)); }
template <class F> TP_HD float log2_normal(float x) { return log2_of<F>(split_normal(x)); }

// 1/sqrt(x): the exponent-halving start (0x5f375a86, within 3.5%), then three Newton steps
// y (3/2 - x y^2 / 2), each squaring the error: 2^-23 after rounding, where every result lies at
// least 2^-21.4 (float16; 2^-17.9 bfloat16) from a midpoint. Specials: +-0 -> +-inf, +inf -> +0,
// x < 0 and NaN -> NaN.
template <class F> TP_HD float rsqrt(float x) {
  float xs = x, post = 1.0f;
  if constexpr (F::kFloatSubnormals) {  // an even power of two makes a float subnormal normal
    const bool subnormal = x < 0x1p-126f;
    xs = subnormal ? x * 0x1p24f : x;
    post = subnormal ? 0x1p12f : 1.0f;
  }
  const float half_x = 0.5f * xs;
  float y = from_bits(0x5f375a86u - (to_bits(xs) >> 1));
  y = y * fma(-half_x, y * y, 1.5f);
  y = y * fma(-half_x, y * y, 1.5f);
  y = y * fma(-half_x, y * y, 1.5f);
  // +-0 and +inf swap with +-inf and +0 by their exponent bits
  const float inf = limits<float>::pos_inf();
  const float r = (x > 0.0f) & (x < inf) ? y * post : from_bits(to_bits(x) ^ to_bits(inf));
  return x >= 0.0f ? r : limits<float>::quiet_nan();
}

}  // namespace ieee_math16
}  // namespace tp
