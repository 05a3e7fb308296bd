// Scalar arithmetic every algorithm is written in, with one meaning on the GPU and on the
// host. Exactly rounded ops (add, sub, mul, fdiv, fma, sqrt for f32/f64, max, min) give
// the same bits on both; the host half/bfloat16 types live in backends/cpu.
//
// max/min follow CUDA fmaxf/fminf: a NaN meeting a number yields the number; the *_nan
// forms use the PTX .NaN instructions and propagate NaN. Signed zeros: -0 < +0.
#pragma once
#include "config.cuh"

#if TP_ON_DEVICE && defined(TP_WITH_FP16)
#include <cuda_fp16.h>
#endif
#if TP_ON_DEVICE && defined(TP_WITH_BF16)
#include <cuda_bf16.h>
#endif

#if !TP_ON_DEVICE
#include <cmath>
#include <cstring>
#endif

namespace tp {

// ---- bit views -------------------------------------------------------------------------
TP_HD unsigned bits_of(float x) {
#if TP_ON_DEVICE
  return __float_as_uint(x);
#else
  unsigned u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
TP_HD float float_of(unsigned u) {
#if TP_ON_DEVICE
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}
TP_HD unsigned long long bits_of(double x) {
#if TP_ON_DEVICE
  return (unsigned long long)__double_as_longlong(x);
#else
  unsigned long long u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
TP_HD double double_of(unsigned long long u) {
#if TP_ON_DEVICE
  return __longlong_as_double((long long)u);
#else
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// ---- special values ------------------------------------------------------------------
template <class T> struct limits;
template <> struct limits<float> {
  static TP_HD float neg_zero() { return float_of(0x80000000u); }
  static TP_HD float pos_inf() { return float_of(0x7f800000u); }
  static TP_HD float neg_inf() { return float_of(0xff800000u); }
  static TP_HD float quiet_nan() { return float_of(0x7fffffffu); }
};
template <> struct limits<double> {
  static TP_HD double neg_zero() { return double_of(0x8000000000000000ull); }
  static TP_HD double pos_inf() { return double_of(0x7ff0000000000000ull); }
  static TP_HD double neg_inf() { return double_of(0xfff0000000000000ull); }
  static TP_HD double quiet_nan() { return double_of(0x7fffffffffffffffull); }
};

TP_HD bool is_nan(float x) { return x != x; }
TP_HD bool is_nan(double x) { return x != x; }
#if TP_ON_DEVICE
TP_HD float magnitude(float x) { return fabsf(x); }  // |x|: a modifier on the instruction that reads it
TP_HD double magnitude(double x) { return fabs(x); }
#else
inline float magnitude(float x) { return std::fabs(x); }
inline double magnitude(double x) { return std::fabs(x); }
#endif
TP_HD bool sign_bit(float x) { return (bits_of(x) >> 31) != 0; }
TP_HD bool sign_bit(double x) { return (bits_of(x) >> 63) != 0; }

// ---- exactly rounded arithmetic, f32 and f64 ----------------------------------------------
// Kernels are compiled with --fmad=false and the host with -ffp-contract=off, so a + b is
// one rounding on both sides.
TP_HD float add(float a, float b) { return a + b; }
TP_HD float sub(float a, float b) { return a - b; }
TP_HD float mul(float a, float b) { return a * b; }
TP_HD float fdiv(float a, float b) { return a / b; }
TP_HD double add(double a, double b) { return a + b; }
TP_HD double sub(double a, double b) { return a - b; }
TP_HD double mul(double a, double b) { return a * b; }
TP_HD double fdiv(double a, double b) { return a / b; }
#if TP_ON_DEVICE
TP_HD float fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
TP_HD double fma(double a, double b, double c) { return __fma_rn(a, b, c); }
TP_HD float sqrt(float a) { return sqrtf(a); }
TP_HD double sqrt(double a) { return ::sqrt(a); }
#else
inline float fma(float a, float b, float c) { return std::fma(a, b, c); }
inline double fma(double a, double b, double c) { return std::fma(a, b, c); }
inline float sqrt(float a) { return std::sqrt(a); }
inline double sqrt(double a) { return std::sqrt(a); }
#endif

// a / b for many a and one b (a row divided by its sum) with fdiv's bits, in three instructions of
// the FMA pipe each (Markstein's correction): y = RN(1/b) once, q = RN(a y), then
// RN(q + RN(a - b q) y). Before its last rounding that value lies within (a/b) 2^-46 (1 + 2^-24) of
// a/b, so it rounds as a/b does wherever a/b lies farther than that from a rounding midpoint; for
// significands A, B (integers in [2^23, 2^24)) that leaves only the pairs with
// |2^24 A - odd B| <= 4 or |2^25 A - odd B| <= 8, and every one of those 127,925,210 pairs gives
// RN(a/b) (tests/test_float_divisor.py enumerates them). That holds where nothing leaves the
// normal range: 2^-125 <= |b| <= 2^125 (else every a is too small), and a neither too small nor
// too large, max(|b| 2^-124, 2^-100) <= |a| < |b| 2^126 (so a/b, q and the remainder stay normal or
// exact; zeros, infinities, NaN and the rest divide). It replaced a product in double, whose conversions
// to and from double run on a slow pipe (H200, softmax at the planner's scopes: rows of 32000
// 3.42 -> 3.76 TB/s float32 and 1.93 -> 2.10 bfloat16, 16384 bfloat16 3.38 -> 3.45).
class FloatDivisor {
 public:
  TP_HD explicit FloatDivisor(float b)
      : b_(b), y_(1.0f / b), low_(least_fitting(magnitude(b))), high_(magnitude(b) * 0x1p126f) {}
  TP_HD float divide(float a) const {
    const float q = a * y_;
    return fma(fma(-q, b_, a), y_, q);
  }
  // a fits where it is neither too small nor too large (NaN is the latter)
  TP_HD bool too_small(float a) const { return magnitude(a) < low_; }
  TP_HD bool too_large(float a) const { return !(magnitude(a) < high_); }

 private:
  // the least |a| that fits for |b| = m; infinity (none) for an m out of range or NaN
  static TP_HD float least_fitting(float m) {
    if (!(m >= 0x1p-125f && m <= 0x1p125f)) return limits<float>::pos_inf();
    return m > 0x1p24f ? m * 0x1p-124f : 0x1p-100f;
  }
  float b_, y_, low_, high_;
};

// max/min, NaN loses (fmaxf). Host side spells out what the GPU's FMNMX does.
#if TP_ON_DEVICE
TP_HD float max_num(float a, float b) { return fmaxf(a, b); }
TP_HD float min_num(float a, float b) { return fminf(a, b); }
TP_HD double max_num(double a, double b) { return fmax(a, b); }
TP_HD double min_num(double a, double b) { return fmin(a, b); }
TP_HD float max_nan(float a, float b) {
  float d;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}
TP_HD float min_nan(float a, float b) {
  float d;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}
#else
// Written as selects a vector unit has (pick(b > a, b, a) is x86's maxps exactly), so that
// loops over them vectorize; the CPU's vector Packs (backends/cpu/pack.h) run these same
// templates, their comparisons and picks lane-wise.
template <class T> inline T pick(bool c, T x, T y) { return c ? x : y; }
inline float with_bits(float, unsigned u) { return float_of(u); }
inline double with_bits(double, unsigned long long u) { return double_of(u); }
template <class T> inline T host_max_num(T a, T b) {
  T r = pick(b > a, b, a);                                     // a where either is NaN
  r = pick(is_nan(a), b, r);                                   // a number beats a NaN
  r = pick(a == b, with_bits(a, bits_of(a) & bits_of(b)), r);  // -0 < +0
  return pick(is_nan(r), limits<T>::quiet_nan(), r);           // r is NaN only where both are
}
template <class T> inline T host_min_num(T a, T b) {
  T r = pick(b < a, b, a);
  r = pick(is_nan(a), b, r);
  r = pick(a == b, with_bits(a, bits_of(a) | bits_of(b)), r);
  return pick(is_nan(r), limits<T>::quiet_nan(), r);
}
template <class T> inline T host_max_nan(T a, T b) {
  return pick(is_nan(a) | is_nan(b), limits<T>::quiet_nan(), host_max_num(a, b));
}
template <class T> inline T host_min_nan(T a, T b) {
  return pick(is_nan(a) | is_nan(b), limits<T>::quiet_nan(), host_min_num(a, b));
}
inline float max_num(float a, float b) { return host_max_num(a, b); }
inline float min_num(float a, float b) { return host_min_num(a, b); }
inline double max_num(double a, double b) { return host_max_num(a, b); }
inline double min_num(double a, double b) { return host_min_num(a, b); }
inline float max_nan(float a, float b) { return host_max_nan(a, b); }
inline float min_nan(float a, float b) { return host_min_nan(a, b); }
#endif
// PTX has no max.NaN.f64; spelled out the same way on both sides.
TP_HD double max_nan(double a, double b) {
  return (is_nan(a) || is_nan(b)) ? limits<double>::quiet_nan() : max_num(a, b);
}
TP_HD double min_nan(double a, double b) {
  return (is_nan(a) || is_nan(b)) ? limits<double>::quiet_nan() : min_num(a, b);
}

// ---- int32, which only treduce carries: sums wrap (two's complement) as the GPU's add does;
// integers have no NaN, so the NaN forms are the plain ones ------------------------------
TP_HD int add(int a, int b) { return static_cast<int>(static_cast<unsigned>(a) + static_cast<unsigned>(b)); }
TP_HD int max_num(int a, int b) { return a > b ? a : b; }
TP_HD int min_num(int a, int b) { return a < b ? a : b; }
TP_HD int max_nan(int a, int b) { return max_num(a, b); }
TP_HD int min_nan(int a, int b) { return min_num(a, b); }

// ---- flush-to-zero, as the .ftz instruction forms do --------------------------------------
TP_HD float flush_subnormal(float x) {
  return (bits_of(x) & 0x7f800000u) == 0 ? float_of(bits_of(x) & 0x80000000u) : x;
}

// ---- 1 / a, exactly rounded
TP_HD float reciprocal(float a) { return 1.0f / a; }
TP_HD double reciprocal(double a) { return 1.0 / a; }

// ---- conversions (round to nearest even) -------------------------------------------------
// cast<To>(x): widen exactly to float/double, then one rounding to To.
TP_HD float widen(float x) { return x; }
TP_HD double widen(double x) { return x; }
TP_HD int widen(int x) { return x; }
template <class To> struct convert_to;
template <> struct convert_to<float> {
  static TP_HD float from(float x) { return x; }
  static TP_HD float from(double x) { return (float)x; }
};
template <> struct convert_to<double> {
  static TP_HD double from(float x) { return (double)x; }
  static TP_HD double from(double x) { return x; }
};
template <> struct convert_to<int> {
  static TP_HD int from(int x) { return x; }
  static TP_HD int from(double x) { return static_cast<int>(x); }  // an integral scalar beside int tiles
};
}  // namespace tp

#include "transcendental.cuh"

namespace tp {

// ---- the device's half and bfloat16 -----------------------------------------------------
// CUDA's intrinsics are overloaded on both 2-byte types (H) and on both pair types (P): one
// list of ops serves each; only the exactly rounded instructions are used (sqrt, division and
// the transcendentals come from TP_SIXTEEN_BIT_THROUGH_FLOAT, the host's own too).
#define TP_TWO_BYTE_OPS(H)                                                                       \
  TP_HD H add(H a, H b) { return __hadd(a, b); }                                                 \
  TP_HD H sub(H a, H b) { return __hsub(a, b); }                                                 \
  TP_HD H mul(H a, H b) { return __hmul(a, b); }                                                 \
  TP_HD H fma(H a, H b, H c) { return __hfma(a, b, c); }                                         \
  TP_HD H max_num(H a, H b) { return __hmax(a, b); }                                             \
  TP_HD H min_num(H a, H b) { return __hmin(a, b); }                                             \
  TP_HD H max_nan(H a, H b) { return __hmax_nan(a, b); }                                         \
  TP_HD H min_nan(H a, H b) { return __hmin_nan(a, b); }
// Pairs: each paired intrinsic runs its scalar twin's instructions on both halves, so a lane
// of a pair gets the scalar op's bits (elementwise maps take two registers at a time).
#define TP_TWO_BYTE_PAIR_OPS(P)                                                                  \
  TP_HD P add(P a, P b) { return __hadd2(a, b); }                                                \
  TP_HD P sub(P a, P b) { return __hsub2(a, b); }                                                \
  TP_HD P mul(P a, P b) { return __hmul2(a, b); }                                                \
  TP_HD P fma(P a, P b, P c) { return __hfma2(a, b, c); }                                        \
  TP_HD P max_num(P a, P b) { return __hmax2(a, b); }                                            \
  TP_HD P min_num(P a, P b) { return __hmin2(a, b); }                                            \
  TP_HD P max_nan(P a, P b) { return __hmax2_nan(a, b); }                                        \
  TP_HD P min_nan(P a, P b) { return __hmin2_nan(a, b); }

#if TP_ON_DEVICE && defined(TP_WITH_FP16)
template <> struct limits<__half> {
  static TP_HD __half neg_zero() { return __ushort_as_half(0x8000); }
  static TP_HD __half pos_inf() { return __ushort_as_half(0x7c00); }
  static TP_HD __half neg_inf() { return __ushort_as_half(0xfc00); }
  static TP_HD __half quiet_nan() { return __ushort_as_half(0x7fff); }
};
TP_TWO_BYTE_OPS(__half)
TP_HD float widen(__half x) { return __half2float(x); }
template <> struct convert_to<__half> {
  static TP_HD __half from(float x) { return __float2half_rn(x); }
  static TP_HD __half from(double x) { return __double2half(x); }
};
TP_SIXTEEN_BIT_THROUGH_FLOAT(__half, float, ieee_math16::Half)
TP_TWO_BYTE_PAIR_OPS(__half2)
#endif
#if TP_ON_DEVICE && defined(TP_WITH_BF16)
template <> struct limits<__nv_bfloat16> {
  static TP_HD __nv_bfloat16 neg_zero() { return __ushort_as_bfloat16(0x8000); }
  static TP_HD __nv_bfloat16 pos_inf() { return __ushort_as_bfloat16(0x7f80); }
  static TP_HD __nv_bfloat16 neg_inf() { return __ushort_as_bfloat16(0xff80); }
  static TP_HD __nv_bfloat16 quiet_nan() { return __ushort_as_bfloat16(0x7fff); }
};
TP_TWO_BYTE_OPS(__nv_bfloat16)
TP_HD float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> struct convert_to<__nv_bfloat16> {
  static TP_HD __nv_bfloat16 from(float x) { return __float2bfloat16_rn(x); }
  static TP_HD __nv_bfloat16 from(double x) { return __double2bfloat16(x); }
};
TP_SIXTEEN_BIT_THROUGH_FLOAT(__nv_bfloat16, double, ieee_math16::BFloat16)
TP_TWO_BYTE_PAIR_OPS(__nv_bfloat162)
#endif
#undef TP_TWO_BYTE_OPS
#undef TP_TWO_BYTE_PAIR_OPS

template <class To, class From> TP_HD To cast(From x) { return convert_to<To>::from(widen(x)); }

}  // namespace tp

#include "index.cuh"
#include "activation.cuh"
#include "transcendental_fast.cuh"
