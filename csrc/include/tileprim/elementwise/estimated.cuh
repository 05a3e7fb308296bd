// An exact program's float chain rounded to 16 bits, estimated (the GPU only; DESIGN §3: the
// exact bits). Where a float32 value is a chain of products and quotients (mul, fdiv) of values
// and of exp, exp2, sigmoid or silu of values, and nothing reads it but its cast to float16 or
// bfloat16 (SwiGLU's silu(a) * b), the GPU computes the chain with the fast forms of those ops
// (transcendental_fast.cuh) and bounds, slot by slot, the estimate's relative distance from the
// exact chain's value; where both ends of that interval round to the same 16-bit value, so does
// the exact value (rounding is monotone), and the estimate's rounding is the exact bits. Elsewhere
// (about 1 slot in 2000 for bfloat16, 1 in 250 for float16) the slot's chain runs exactly, as the
// CPU backend runs every slot. backends/cuda/estimated_chain.cc finds the chains and writes the
// calls below.
//
// Each fast form's bound, relative and in units of 2^-24 (u), is its distance from the exact
// form: ex2.approx.ftz.f32 8 u (the PTX ISA's 2 ulps, doubled), rcp.approx.ftz.f32 4 u (1 ulp,
// doubled), e^x's argument x log2(e) rounded once (its error reaches e^x as 1.25 |x| u), each
// float rounding 1 u, and the exact form's own error (float32 exp faithful: 1.8 u; the others
// round hi + lo: 1.13 u). tests/test_estimated_chain.py checks the fast forms against these
// bounds on the GPU at every bfloat16 input and 2^24 float32 samples. A bound is 1 (every slot
// takes the exact path) outside the range where both forms' results are normal floats.
#pragma once
#include "maps.cuh"

namespace tp {

constexpr float kEstimateU = 0x1p-24f;  // u: the bounds' unit, relative

#if TP_ON_DEVICE
// bound + the bound of an op's fast form (fastmath's functor) at x, named by its exact functor.
// Outside the range where both forms' results are normal floats, the bounds need no test but
// silu's near 0: there e^x's overflow, or a result ex2's or rcp's .ftz flushes to 0, makes the
// estimate 0, inf or NaN, which rounds_alike refuses; a silu of |x| below 2^-60 (a subnormal
// result) takes the bound 1, which refuses every estimate.
template <class Op> struct Estimated;
template <> struct Estimated<map_op::Exp> {  // ex2 8 + argument 1.25 |x| + exact 1.8
  static TP_HD float bound(float x, float bound) { return fma(1.25f * kEstimateU, magnitude(x), bound + 10.0f * kEstimateU); }
};
template <> struct Estimated<map_op::Exp2> {  // ex2 8 + exact 1.13 (x is ex2's argument itself)
  static TP_HD float bound(float, float bound) { return bound + 10.0f * kEstimateU; }
};
// ex2 8 (weighted by e/(1 + e) <= 1) + argument 1.25 |x| + 1 + e's sum 1 + rcp 4 + exact 1.13
template <> struct Estimated<map_op::Sigmoid> {
  static TP_HD float bound(float x, float bound) { return fma(1.25f * kEstimateU, magnitude(x), bound + 15.0f * kEstimateU); }
};
template <> struct Estimated<map_op::Silu> {  // sigmoid's + the product 1
  static TP_HD float bound(float x, float bound) {
    return magnitude(x) >= 0x1p-60f ? fma(1.25f * kEstimateU, magnitude(x), bound + 16.0f * kEstimateU) : 1.0f;
  }
};

// |y| within [2^-100, 2^100]: a normal float whose products in the chain stay normal (a NaN is not)
TP_HD bool within_estimate_range(float y) { return magnitude(y) >= 0x1p-100f && magnitude(y) <= 0x1p100f; }

// bound[f] = c: the chain's roundings (each product or quotient 1 u in each chain, and the
// interval's two ends 1 u each)
template <int N> TP_HD void estimate_start(float (&bound)[N], float c) {
  TP_UNROLL_BY(N)
  for (int f = 0; f < N; ++f) bound[f] = c;
}
// bound[f] += Op's fast form's bound at x[f]
template <class Op, int N> TP_HD void estimate_add(float (&bound)[N], const float (&x)[N]) {
  TP_UNROLL_BY(N)
  for (int f = 0; f < N; ++f) bound[f] = Estimated<Op>::bound(x[f], bound[f]);
}
// bound[f] = 1 where v[f], a product inside the chain, leaves [2^-100, 2^100] (there relative
// bounds no longer hold)
template <int N> TP_HD void estimate_normal(float (&bound)[N], const float (&v)[N]) {
  TP_UNROLL_BY(N)
  for (int f = 0; f < N; ++f) bound[f] = within_estimate_range(v[f]) ? bound[f] : 1.0f;
}

// Whether every value within y's bound rounds to 16 bits as y does: |y| at least 2^-100 (so that
// the chain's last rounding is relative; a NaN fails), both ends of [y (1 - bound), y (1 + bound)]
// converted in one instruction, their halves compared (an end past the 16-bit range is inf, and
// both are only where y's rounding is inf too)
template <class Pair> TP_HD bool same_halves(Pair ends) {
  unsigned w;
  memcpy(&w, &ends, sizeof w);
  return ((w ^ (w >> 16)) & 0xffffu) == 0u;
}
#if defined(TP_WITH_FP16)
TP_HD bool rounds_alike(__half, float y, float bound) {
  return magnitude(y) >= 0x1p-100f && same_halves(__floats2half2_rn(fma(-y, bound, y), fma(y, bound, y)));
}
#endif
#if defined(TP_WITH_BF16)
TP_HD bool rounds_alike(__nv_bfloat16, float y, float bound) {
  return magnitude(y) >= 0x1p-100f && same_halves(__floats2bfloat162_rn(fma(-y, bound, y), fma(y, bound, y)));
}
#endif

// The slots whose estimate y may round to TD otherwise than the exact chain's value, as bits
template <class TD, int N> TP_HD unsigned estimate_misses(const float (&y)[N], const float (&bound)[N]) {
  static_assert(N <= 32, "a slot a bit");
  unsigned missed = 0;
  TP_UNROLL_BY(N)
  for (int f = 0; f < N; ++f) missed |= rounds_alike(TD{}, y[f], bound[f]) ? 0u : 1u << f;
  return missed;
}

// x's slot `bit` (one bit set), and a value put there, by selects: a run-time index would put the
// registers in memory
template <class T, int N> TP_HD T slot_at(const T (&x)[N], unsigned bit) {
  T v = x[0];
  TP_UNROLL_BY(N)
  for (int f = 1; f < N; ++f) v = (bit >> f) & 1u ? x[f] : v;
  return v;
}
template <class T, int N> TP_HD void set_slot(T (&x)[N], unsigned bit, T v) {
  TP_UNROLL_BY(N)
  for (int f = 0; f < N; ++f) x[f] = (bit >> f) & 1u ? v : x[f];
}
#endif

}  // namespace tp
