// binary16 (NumPy float16) and bfloat16 (ml_dtypes) as the CPU backend computes with them.
// Each op is evaluated exactly (or with its exact error term) in double and rounded once to
// the format, ties to even: the same bits as the GPU's exactly rounded f16/bf16
// instructions (add, sub, mul, fma, max, min; fdiv and sqrt are exact here too, while the
// GPU's hsqrt/__hdiv go through f32 approximations).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "tileprim/numeric.cuh"

namespace tp {

template <int kMant, int kExp>
struct small_float {
  std::uint16_t bits = 0;

  static constexpr int kBias = (1 << (kExp - 1)) - 1;
  static constexpr std::uint16_t kExpMask = ((1u << kExp) - 1u) << kMant;

  static small_float from_bits(std::uint16_t b) {
    small_float f;
    f.bits = b;
    return f;
  }
  // The exact value hi + lo (|lo| at most half an ulp of hi), rounded once.
  static small_float round(double hi, double lo = 0.0);

  double to_double() const {
    const bool neg = bits >> 15;
    const int e = (bits & kExpMask) >> kMant;
    const int m = bits & ((1u << kMant) - 1u);
    double v;
    if (e == (1 << kExp) - 1) {
      v = m ? std::nan("") : INFINITY;
    } else if (e == 0) {
      v = std::ldexp(m, 1 - kBias - kMant);
    } else {
      v = std::ldexp(m + (1 << kMant), e - kBias - kMant);
    }
    return neg ? -v : v;
  }
};

template <int kMant, int kExp>
small_float<kMant, kExp> small_float<kMant, kExp>::round(double hi, double lo) {
  const std::uint16_t sign = std::signbit(hi) ? 0x8000 : 0;
  if (std::isnan(hi)) return from_bits(sign | kExpMask | (1u << (kMant - 1)));
  const double a = std::fabs(hi);
  const double toward = std::signbit(hi) ? -lo : lo;  // the error, in the direction of |hi|
  if (std::isinf(a)) return from_bits(sign | kExpMask);
  if (a == 0.0) return from_bits(sign);
  const int emin = 1 - kBias;
  int e2;
  std::frexp(a, &e2);
  const int exponent = std::max(e2 - 1, emin);
  const double quantum = std::ldexp(1.0, exponent - kMant);
  const double scaled = a / quantum;  // exact: a power-of-two scaling
  const double whole = std::floor(scaled);
  const double frac = scaled - whole;
  bool up;
  if (frac != 0.5) {
    up = frac > 0.5;
  } else if (toward != 0.0) {
    up = toward > 0.0;
  } else {
    up = std::fmod(whole, 2.0) != 0.0;  // tie: to even
  }
  const double mant = whole + (up ? 1.0 : 0.0);
  const double value = mant * quantum;
  if (value >= std::ldexp(1.0, kBias + 1)) return from_bits(sign | kExpMask);
  if (mant < std::ldexp(1.0, kMant) && exponent == emin) {
    return from_bits(sign | static_cast<std::uint16_t>(mant));  // subnormal (or zero)
  }
  std::frexp(value, &e2);
  const int e = e2 - 1;
  const auto field = static_cast<std::uint16_t>(e + kBias) << kMant;
  const auto frac_bits = static_cast<std::uint16_t>(std::ldexp(value, kMant - e) - std::ldexp(1.0, kMant));
  return from_bits(sign | field | frac_bits);
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
template <class F> F add(F a, F b) {
  double s, e;
  two_sum(a.to_double(), b.to_double(), s, e);
  return F::round(s, e);
}
template <class F> F fma(F a, F b, F c) {
  double s, e;  // a*b is exact in double for 11- and 8-bit significands
  two_sum(a.to_double() * b.to_double(), c.to_double(), s, e);
  return F::round(s, e);
}
template <class F> F quiet_nan() { return F::from_bits(F::kExpMask | 0x7fff); }
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

#define TP_HOST_SMALL_FLOAT_OPS(F)                                                              \
  inline F add(F a, F b) { return host_small_float::add(a, b); }                                  \
  inline F sub(F a, F b) { return host_small_float::add(a, F::from_bits(b.bits ^ 0x8000)); }       \
  inline F mul(F a, F b) { return F::round(a.to_double() * b.to_double()); }                      \
  inline F fdiv(F a, F b) { return F::round(a.to_double() / b.to_double()); }                     \
  inline F fma(F a, F b, F c) { return host_small_float::fma(a, b, c); }                          \
  inline F sqrt(F a) { return F::round(std::sqrt(a.to_double())); }                              \
  inline F exp(F a) { return F::round(std::exp(a.to_double())); }                                \
  inline F exp2(F a) { return F::round(std::exp2(a.to_double())); }                              \
  inline F log2(F a) { return F::round(std::log2(a.to_double())); }                              \
  inline F reciprocal(F a) { return F::round(1.0 / a.to_double()); }                             \
  inline F max_num(F a, F b) { return host_small_float::pick(a, b, true, false); }               \
  inline F min_num(F a, F b) { return host_small_float::pick(a, b, false, false); }              \
  inline F max_nan(F a, F b) { return host_small_float::pick(a, b, true, true); }                \
  inline F min_nan(F a, F b) { return host_small_float::pick(a, b, false, true); }               \
  inline float widen(F a) { return static_cast<float>(a.to_double()); }                           \
  template <> struct limits<F> {                                                                  \
    static F neg_zero() { return F::from_bits(0x8000); }                                          \
    static F pos_inf() { return F::from_bits(F::kExpMask); }                                      \
    static F neg_inf() { return F::from_bits(0x8000 | F::kExpMask); }                             \
    static F quiet_nan() { return host_small_float::quiet_nan<F>(); }                             \
  };                                                                                              \
  template <> struct convert_to<F> {                                                              \
    static F from(float x) { return F::round(x); }                                                \
    static F from(double x) { return F::round(x); }                                               \
  };

TP_HOST_SMALL_FLOAT_OPS(half_t)
TP_HOST_SMALL_FLOAT_OPS(bfloat16_t)
#undef TP_HOST_SMALL_FLOAT_OPS

}  // namespace tp
