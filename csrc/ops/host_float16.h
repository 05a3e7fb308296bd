// binary16 (NumPy float16) and bfloat16 (ml_dtypes) as the CPU backend computes with them.
// Each op is evaluated exactly (or with its exact error term) in double and rounded once to
// the format, ties to even: the same bits as the GPU's exactly rounded f16/bf16
// instructions (add, sub, mul, fma, max, min). sqrt, fdiv, reciprocal and the transcendentals
// are the device headers' own (TP_SIXTEEN_BIT_THROUGH_FLOAT), as on the GPU. A NaN result is
// the GPU's canonical one.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "tileprim/numeric.cuh"

namespace tp {

template <int kMant, int kExp>
struct small_float {
  std::uint16_t bits = 0;

  static constexpr int kBias = (1 << (kExp - 1)) - 1;
  static constexpr std::uint16_t kExpMask = ((1u << kExp) - 1u) << kMant;
  // The NaN every conversion and op returns, as the GPU's cvt and f16/bf16 instructions give it:
  // sign clear, every other bit set.
  static constexpr std::uint16_t kCanonicalNaN = 0x7fff;

  static small_float from_bits(std::uint16_t b) {
    small_float f;
    f.bits = b;
    return f;
  }
  // The exact value hi + lo (|lo| at most half an ulp of hi), rounded once.
  static small_float round(double hi, double lo = 0.0);
  // A float, rounded once; bfloat16 is float's top half, so its rounding is one carry.
  static small_float from_float(float x) {
    if constexpr (kExp == 8) {
      const std::uint32_t u = bits_of(x);
      if ((u & 0x7fffffffu) > 0x7f800000u) return from_bits(kCanonicalNaN);
      return from_bits(static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16));
    } else {
      return from_bits(half_from_float(x));
    }
  }
  // Half by the FPU's own rounding: |x| (scaled by 2^2, which also takes anything past
  // half's range to infinity) is added to a power of two whose float ulp is half's ulp at
  // x's exponent (never finer than half's subnormal step), so the addition rounds to nearest
  // even exactly where half does; the sum's low bits are then half's exponent and fraction.
  static std::uint16_t half_from_float(float x) {
    const std::uint32_t w = bits_of(x), twice = w + w;  // twice: w without its sign, shifted
    const std::uint16_t sign = static_cast<std::uint16_t>((w >> 16) & 0x8000);
    const float scaled = (std::fabs(x) * float_of(0x77800000u)) * float_of(0x08800000u);  // 2^112, 2^-110
    const std::uint32_t bias = std::max(twice & 0xff000000u, 0x71000000u);
    const std::uint32_t sum = bits_of(float_of((bias >> 1) + 0x07800000u) + scaled);
    const std::uint16_t magnitude = static_cast<std::uint16_t>(((sum >> 13) & 0x7c00) + (sum & 0x0fff));
    return twice > 0xff000000u ? kCanonicalNaN : static_cast<std::uint16_t>(sign | magnitude);  // a select: NaN
  }
  // Exact: every value of both formats is a float. Half's exponent field moves into
  // float's and one multiplication by 2^(127 - 15) rebiases it, subnormals included.
  float to_float() const {
    if constexpr (kExp == 8) {
      return float_of(static_cast<std::uint32_t>(bits) << 16);
    } else {
      static_assert(kMant == 10 && kExp == 5, "half or bfloat16");
      const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000) << 16, em = bits & 0x7fffu;
      const std::uint32_t special = 0x7f800000u | (em & 0x3ffu) << 13;  // infinity, NaN
      const std::uint32_t finite = bits_of(float_of(em << 13) * float_of(0x77800000u));
      return float_of(sign | (em >= kExpMask ? special : finite));  // a select, so loops vectorize
    }
  }

  // A wider IEEE format's bits (kSrcMant fraction bits), rounded to nearest, ties to even.
  template <class U, int kSrcMant, int kSrcExp> static small_float round_bits(U b);

  // Integer work only (no libm): these sit in every 16-bit loop of the CPU backend.
  double to_double() const {
    const std::uint64_t sign = static_cast<std::uint64_t>(bits >> 15) << 63;
    const int e = (bits & kExpMask) >> kMant;
    const std::uint64_t m = bits & ((1u << kMant) - 1u);
    if (e == (1 << kExp) - 1) return double_of(sign | (m ? 0x7ff8000000000000ull : 0x7ff0000000000000ull));
    if (e == 0) {  // subnormal or zero: m units of the smallest subnormal, a power of two
      const double v = static_cast<double>(m) * double_of(static_cast<std::uint64_t>(1023 + 1 - kBias - kMant) << 52);
      return sign ? -v : v;
    }
    return double_of(sign | static_cast<std::uint64_t>(e - kBias + 1023) << 52 | m << (52 - kMant));
  }
};

template <int kMant, int kExp>
small_float<kMant, kExp> small_float<kMant, kExp>::round(double hi, double lo) {
  std::uint64_t b = bits_of(hi);
  // Round to odd: a nonzero error sets hi's last bit (moving |hi| toward the exact value), so
  // that rounding this one double, 40 bits wider than the format, rounds hi + lo correctly.
  if (lo != 0.0 && std::isfinite(hi) && (b & 1) == 0) b += (std::signbit(lo) == std::signbit(hi)) ? 1 : -1;
  return round_bits<std::uint64_t, 52, 11>(b);
}

template <int kMant, int kExp>
template <class U, int kSrcMant, int kSrcExp>
small_float<kMant, kExp> small_float<kMant, kExp>::round_bits(U b) {
  constexpr int kSrcBias = (1 << (kSrcExp - 1)) - 1, kSrcMax = (1 << kSrcExp) - 1;
  const std::uint16_t sign = static_cast<std::uint16_t>((b >> (kSrcMant + kSrcExp)) << 15);
  const int exp = static_cast<int>((b >> kSrcMant) & kSrcMax);
  const U frac = b & ((U(1) << kSrcMant) - 1);
  if (exp == kSrcMax) return from_bits(frac ? kCanonicalNaN : static_cast<std::uint16_t>(sign | kExpMask));
  const std::uint64_t m = frac | (exp ? std::uint64_t(1) << kSrcMant : 0);
  const int E = (exp ? exp : 1) - kSrcBias + kBias;  // the format's biased exponent of |x|
  const int shift = kSrcMant - kMant + (E < 1 ? 1 - E : 0);
  if (m == 0 || shift > 63) return from_bits(sign);
  std::uint64_t r = m >> shift;
  const std::uint64_t rest = m & ((std::uint64_t(1) << shift) - 1), half = std::uint64_t(1) << (shift - 1);
  if (rest > half || (rest == half && (r & 1))) ++r;  // to nearest, ties to even
  // Normal: (E - 1) << kMant plus r, hidden bit included, carries into the exponent; a
  // subnormal r is the bits themselves (r == 1 << kMant is the smallest normal).
  const std::uint64_t magnitude = E < 1 ? r : (static_cast<std::uint64_t>(E - 1) << kMant) + r;
  if (magnitude >= kExpMask) return from_bits(sign | kExpMask);
  return from_bits(sign | static_cast<std::uint16_t>(magnitude));
}

using half_t = small_float<10, 5>;
using bfloat16_t = small_float<7, 8>;

namespace host_small_float {
// Error-free sum: a + b == s + err exactly (Knuth's two-sum).
inline void two_sum(double a, double b, double& s, double& err) {
  s = a + b;
  const double bb = s - a;
  err = (a - (s - bb)) + (b - bb);
}
// +, -, * and sqrt of 16-bit values in float, then rounded: float's 24 bits are at least
// 2p + 2 for p = 11 and 8, so the two roundings give the one correct rounding (Figueroa,
// 1995); none reaches float's subnormals with extra bits (half's exponents are small;
// bfloat16's products have at most 16 significant bits; square roots grow small values).
template <class F> F add(F a, F b) { return F::from_float(a.to_float() + b.to_float()); }
template <class F> F quiet_nan() { return F::from_bits(F::kCanonicalNaN); }
// Rounding to odd (truncate, then set the last bit where anything was cut) keeps what rounding
// to nearest at two or more bits fewer needs: so s + e rounded to odd in double, then in float,
// then to nearest in the 16-bit format is the one correct rounding of s + e. Written as selects
// over float and double, so loops of it vectorize (no branch, no libm).
inline double odd_double(double s, double e) {
  const std::uint64_t b = bits_of(s);
  const bool inexact = e != 0.0 && std::fabs(s) <= std::numeric_limits<double>::max();
  const std::uint64_t toward_exact = (e < 0) == (s < 0) ? b + 1 : b - 1;  // |s| moves toward |s + e|
  return double_of(inexact && (b & 1) == 0 ? toward_exact : b);
}
inline float odd_float(double d) {
  const float f = static_cast<float>(d);
  const double back = f;
  const std::uint32_t b = bits_of(f);
  const std::uint32_t truncated = std::fabs(back) > std::fabs(d) ? b - 1 : b;  // f rounded away: one step back
  return float_of(back != d ? truncated | 1u : b);
}
template <class F> F fma(F a, F b, F c) {
  double s, e;  // a*b is exact in double for 11- and 8-bit significands
  two_sum(static_cast<double>(a.to_float()) * static_cast<double>(b.to_float()), static_cast<double>(c.to_float()), s, e);
  const F r = F::from_float(odd_float(odd_double(s, e)));
  return s != s ? quiet_nan<F>() : r;  // one NaN whatever the compiler's operand order gave
}
template <class F> F pick(F a, F b, bool want_max, bool nan_wins) {
  const bool na = std::isnan(a.to_double()), nb = std::isnan(b.to_double());
  if (na || nb) {
    if (nan_wins || (na && nb)) return quiet_nan<F>();
    return na ? b : a;
  }
  const double x = a.to_double(), y = b.to_double();
  if (x == y) return (std::signbit(x) == want_max) ? b : a;  // -0 < +0
  return (x > y) == want_max ? a : b;
}
}  // namespace host_small_float

#define TP_HOST_SMALL_FLOAT_OPS(F, Wide, Format16)                                                            \
  inline F add(F a, F b) { return host_small_float::add(a, b); }                                  \
  inline F sub(F a, F b) { return host_small_float::add(a, F::from_bits(b.bits ^ 0x8000)); }       \
  inline F mul(F a, F b) { return F::from_float(a.to_float() * b.to_float()); }                  \
  inline F fma(F a, F b, F c) { return host_small_float::fma(a, b, c); }                          \
  inline F max_num(F a, F b) { return host_small_float::pick(a, b, true, false); }               \
  inline F min_num(F a, F b) { return host_small_float::pick(a, b, false, false); }              \
  inline F max_nan(F a, F b) { return host_small_float::pick(a, b, true, true); }                \
  inline F min_nan(F a, F b) { return host_small_float::pick(a, b, false, true); }               \
  inline float widen(F a) { return a.to_float(); }                                                \
  template <> struct limits<F> {                                                                  \
    static F neg_zero() { return F::from_bits(0x8000); }                                          \
    static F pos_inf() { return F::from_bits(F::kExpMask); }                                      \
    static F neg_inf() { return F::from_bits(0x8000 | F::kExpMask); }                             \
    static F quiet_nan() { return host_small_float::quiet_nan<F>(); }                             \
  };                                                                                              \
  template <> struct convert_to<F> {                                                              \
    static F from(float x) { return F::from_float(x); }                                           \
    static F from(double x) { return F::round(x); }                                               \
  };                                                                                              \
  TP_SIXTEEN_BIT_THROUGH_FLOAT(F, Wide, Format16)

TP_HOST_SMALL_FLOAT_OPS(half_t, float, ieee_math16::Half)
TP_HOST_SMALL_FLOAT_OPS(bfloat16_t, double, ieee_math16::BFloat16)
#undef TP_HOST_SMALL_FLOAT_OPS
TP_SIXTEEN_BIT_ACTIVATIONS(half_t, ieee_math16::Half)
TP_SIXTEEN_BIT_ACTIVATIONS(bfloat16_t, ieee_math16::BFloat16)

}  // namespace tp
