// fastmath=True (opt-in, DESIGN §3): the GPU's own approximations, as Triton, Liger and nvcc's
// --use_fast_math use them: exp and exp2 through ex2.approx.ftz.f32, log and log2 through
// lg2.approx.f32, rsqrt through rsqrt.approx.f32, silu and sigmoid through ex2.approx and
// rcp.approx.ftz.f32, tanh through tanh.approx.f32 (one MUFU; the ex2 form is seven instructions).
// erf has no hardware approximation and stays exact.
// Their bits are the GPU's: no CPU reproduces them, so on the host every function here is the
// exact one (numeric.cuh), and the CPU backend's bits under fastmath are the exact bits.
// float16 and bfloat16 go through the float forms, rounded once (the paired ex2.approx.f16x2 /
// .bf16x2 are two MUFU per pair on sm_90a, like the float form, and less accurate), but for tanh,
// whose 16-bit forms (.f16 from sm_75, .bf16 from sm_90) save the two conversions; float64 has no
// hardware approximation and stays exact. Measured error: tp.op_table()[op]["fastmath"].
//
// Included by numeric.cuh once every type's exact functions are declared.
#pragma once

namespace tp {
namespace fast_math {

#if TP_ON_DEVICE
// ex2 and rcp with .ftz, as the peers use them (subnormal results flush to 0: exp below -87.3);
// lg2 and rsqrt without, so that subnormal inputs (bfloat16 and float32 have them) keep their
// answers (ptxas scales those in three instructions)
#define TP_PTX_APPROXIMATION(name, instruction)                  \
  TP_HD float name(float x) {                                    \
    float y;                                                     \
    asm(instruction " %0, %1;" : "=f"(y) : "f"(x));               \
    return y;                                                    \
  }
TP_PTX_APPROXIMATION(ex2, "ex2.approx.ftz.f32")
TP_PTX_APPROXIMATION(lg2, "lg2.approx.f32")
TP_PTX_APPROXIMATION(rsqrt_approx, "rsqrt.approx.f32")
TP_PTX_APPROXIMATION(rcp, "rcp.approx.ftz.f32")
TP_PTX_APPROXIMATION(tanh_approx, "tanh.approx.f32")
#undef TP_PTX_APPROXIMATION

constexpr float kLog2e = 0x1.715476p+0f, kLn2 = 0x1.62e430p-1f;

TP_HD float exp(float x) { return ex2(x * kLog2e); }
TP_HD float exp2(float x) { return ex2(x); }
TP_HD float log(float x) { return lg2(x) * kLn2; }
TP_HD float log2(float x) { return lg2(x); }
TP_HD float rsqrt(float x) { return rsqrt_approx(x); }
// 1 / (1 + e^-x): e^-x's +inf (x below -88.7) gives 0, as .ftz does every result below 2^-126
TP_HD float sigmoid(float x) { return rcp(1.0f + ex2(x * -kLog2e)); }
// x sigmoid(x), x's -inf taken as -FLT_MAX (max.NaN keeps a NaN) so that it gives -0, not -inf * 0;
// -0 too below -87.3, where sigmoid's result flushes to 0
TP_HD float silu(float x) { return max_nan(x, -0x1.fffffep127f) * sigmoid(x); }
// MUFU.TANH: the PTX ISA bounds its relative error by 2^-11; measured (sm_75) it is near 2^-16.5
TP_HD float tanh(float x) { return tanh_approx(x); }
#endif

// The exact functions where there is no approximation: float64 everywhere, every type on the host
#define TP_EXACT_FORM(T, op) \
  TP_HD T op(T x) { return tp::op(x); }
#define TP_EXACT_FORMS(T)                                                                          \
  TP_EXACT_FORM(T, exp) TP_EXACT_FORM(T, exp2) TP_EXACT_FORM(T, log) TP_EXACT_FORM(T, log2)         \
  TP_EXACT_FORM(T, rsqrt) TP_EXACT_FORM(T, silu) TP_EXACT_FORM(T, sigmoid) TP_EXACT_FORM(T, tanh)
TP_EXACT_FORMS(double)
#if !TP_ON_DEVICE
TP_EXACT_FORMS(float)
#endif
#undef TP_EXACT_FORMS
#undef TP_EXACT_FORM

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
TP_FAST_SIXTEEN_BIT(sigmoid)
TP_FAST_SIXTEEN_BIT(tanh)
#undef TP_FAST_SIXTEEN_BIT

// tanh's 16-bit instructions, where the target has them (one MUFU each, no conversion): chosen
// over the template above as exact matches
#if TP_ON_DEVICE && defined(TP_WITH_FP16)
TP_HD __half tanh(__half x) {
  unsigned short y;
  asm("tanh.approx.f16 %0, %1;" : "=h"(y) : "h"(__half_as_ushort(x)));
  return __ushort_as_half(y);
}
#endif
#if TP_ON_DEVICE && defined(TP_WITH_BF16) && __CUDA_ARCH__ >= 900
TP_HD __nv_bfloat16 tanh(__nv_bfloat16 x) {
  unsigned short y;
  asm("tanh.approx.bf16 %0, %1;" : "=h"(y) : "h"(__bfloat16_as_ushort(x)));
  return __ushort_as_bfloat16(y);
}
#endif

}  // namespace fast_math
}  // namespace tp
