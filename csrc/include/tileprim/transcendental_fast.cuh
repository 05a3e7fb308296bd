// fastmath=True (opt-in, DESIGN §3): the GPU's own approximations, as Triton, Liger and nvcc's
// --use_fast_math use them: exp and exp2 through ex2.approx.ftz.f32, log and log2 through
// lg2.approx.f32, rsqrt through rsqrt.approx.f32, silu through both and rcp.approx.ftz.f32.
// Their bits are the GPU's: no CPU reproduces them, so on the host every function here is the
// exact one (numeric.cuh), and the CPU backend's bits under fastmath are the exact bits.
// float16 and bfloat16 go through the float forms, rounded once (the paired ex2.approx.f16x2 /
// .bf16x2 are two MUFU per pair on sm_90a, like the float form, and less accurate); float64 has
// no hardware approximation and stays exact. Measured error: tp.op_table()[op]["fastmath"].
//
// Included by numeric.cuh once every type's exact functions are declared.
#pragma once

namespace tp {
namespace fast_math {

#if TP_ON_DEVICE
// ftz where the flushed values are those the approximation cannot reach anyway (ex2's results
// below 2^-126, a reciprocal of more than 2^126); lg2 and rsqrt keep subnormal inputs (bfloat16
// and float32 have them), which ptxas scales in three instructions
TP_HD float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
TP_HD float lg2(float x) {
  float y;
  asm("lg2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
TP_HD float rsqrt_approx(float x) {
  float y;
  asm("rsqrt.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
TP_HD float rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

constexpr float kLog2e = 0x1.715476p+0f, kLn2 = 0x1.62e430p-1f;

TP_HD float exp(float x) { return ex2(x * kLog2e); }
TP_HD float exp2(float x) { return ex2(x); }
TP_HD float log(float x) { return lg2(x) * kLn2; }
TP_HD float log2(float x) { return lg2(x); }
TP_HD float rsqrt(float x) { return rsqrt_approx(x); }
// x sigmoid(x) with t = e^-|x| (never overflows): sigmoid is 1 / (1 + t) for x >= 0, t / (1 + t)
// below; x's -inf is taken as -FLT_MAX (max.NaN keeps a NaN), so that it gives -0, not -inf * 0
TP_HD float silu(float x) {
  const float t = ex2(magnitude(x) * -kLog2e), q = rcp(1.0f + t);
  return max_nan(x, -0x1.fffffep127f) * (x >= 0.0f ? q : t * q);
}
#else
TP_HD float exp(float x) { return tp::exp(x); }
TP_HD float exp2(float x) { return tp::exp2(x); }
TP_HD float log(float x) { return tp::log(x); }
TP_HD float log2(float x) { return tp::log2(x); }
TP_HD float rsqrt(float x) { return tp::rsqrt(x); }
TP_HD float silu(float x) { return tp::silu(x); }
#endif

TP_HD double exp(double x) { return tp::exp(x); }
TP_HD double exp2(double x) { return tp::exp2(x); }
TP_HD double log(double x) { return tp::log(x); }
TP_HD double log2(double x) { return tp::log2(x); }
TP_HD double rsqrt(double x) { return tp::rsqrt(x); }
TP_HD double silu(double x) { return tp::silu(x); }

// float16 and bfloat16 (H: widen(H) and convert_to<H>): the float form, rounded once; the exact
// one on the host
#if TP_ON_DEVICE
#define TP_FAST_SIXTEEN_BIT(op) \
  template <class H> TP_HD H op(H x) { return convert_to<H>::from(op(widen(x))); }
#else
#define TP_FAST_SIXTEEN_BIT(op) \
  template <class H> TP_HD H op(H x) { return tp::op(x); }
#endif
TP_FAST_SIXTEEN_BIT(exp)
TP_FAST_SIXTEEN_BIT(exp2)
TP_FAST_SIXTEEN_BIT(log)
TP_FAST_SIXTEEN_BIT(log2)
TP_FAST_SIXTEEN_BIT(rsqrt)
TP_FAST_SIXTEEN_BIT(silu)
#undef TP_FAST_SIXTEEN_BIT

}  // namespace fast_math
}  // namespace tp
