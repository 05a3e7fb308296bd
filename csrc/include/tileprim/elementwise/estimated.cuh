// An exact program's float chain rounded to 16 bits, estimated (the GPU only; DESIGN §3: the
// exact bits). Where a float32 value is a chain of products and quotients (mul, fdiv) of values
// and of exp, exp2, sigmoid or silu of values, and nothing reads it but its cast to float16 or
// bfloat16 (SwiGLU's silu(a) * b), the GPU computes the chain with the fast forms of those ops
// (transcendental_fast.cuh) and bounds, slot by slot, the estimate's relative distance from the
// exact chain's value; where both ends of that interval round to the same 16-bit value, so does
// the exact value (rounding is monotone), and the estimate's rounding is the exact bits. Elsewhere
// (by the bounds, about 1 slot in 2500 for bfloat16, 1 in 300 for float16) the chain runs exactly, as the
// CPU backend runs every slot. backends/cuda/estimated_chain.cc finds the chains and writes the
// calls below.
//
// Each fast form's bound, relative and in units of 2^-24 (u), is its distance from the exact
// form: ex2.approx.ftz.f32 8 u (the PTX ISA's 2 ulps, doubled), rcp.approx.ftz.f32 4 u (1 ulp,
// doubled), e^x's argument x log2(e) rounded once (its error reaches e^x as 1.25 |x| u), each
// float rounding 1 u, and the exact form's own error where its result is normal (float32 exp
// faithful, 0.9 ulp: 1.8 u; exp2, sigmoid and silu about 0.65 ulp: 1.3 u). A ulp is at most 2 u.
// tests/test_estimated_chain.py checks the fast forms against these bounds on the GPU at every
// bfloat16 input and 2^22 float32 samples.
#pragma once
#include "maps.cuh"

namespace tp {

constexpr float kEstimateU = 0x1p-24f;  // u: the bounds' unit, relative

#if TP_ON_DEVICE
// bound + the bound of an op's fast form (fastmath's functor) at x, named by its exact functor.
// Outside the range where both forms' results are normal floats the bounds need no test, but
// silu's of |x| below 2^-60 (a result that may be subnormal: the bound 1 refuses any estimate):
// there e^x's overflow, or a result that ex2's or rcp's .ftz flushes to 0, makes the estimate 0,
// inf or NaN, which the check refuses.
// bound + fixed u + e^x's argument's share: x log2(e) rounded once reaches e^x as 1.25 |x| u
TP_HD float with_argument(float x, float bound, float fixed) {
  return fma(1.25f * kEstimateU, magnitude(x), bound + fixed * kEstimateU);
}
template <class Op> struct Estimated;
template <> struct Estimated<map_op::Exp> {  // ex2 8 + argument + exact 1.8
  static TP_HD float bound(float x, float bound) { return with_argument(x, bound, 10.0f); }
};
template <> struct Estimated<map_op::Exp2> {  // ex2 8 + exact 1.3 (x is ex2's argument itself)
  static TP_HD float bound(float, float bound) { return bound + 10.0f * kEstimateU; }
};
// ex2 8 (weighted by e/(1 + e) <= 1) + argument + 1 + e rounded 1 + rcp 4 + exact 1.3: 14.3
template <> struct Estimated<map_op::Sigmoid> {
  static TP_HD float fast(float x) { return fast_math::sigmoid(x); }
  static TP_HD float bound(float x, float bound) { return with_argument(x, bound, 15.0f); }
};
template <> struct Estimated<map_op::Silu> {  // sigmoid's + the product 1: 15.3
  static TP_HD float fast(float x) { return fast_math::silu(x); }
  static TP_HD float bound(float x, float bound) {
    const float b = with_argument(x, bound, 16.0f);
    return magnitude(x) >= 0x1p-60f ? b : 1.0f;
  }
};

// Two floats rounded to 16 bits in one instruction: a the low half, b the high
#if defined(TP_WITH_FP16)
TP_HD __half2 rounded_pair(__half, float a, float b) { return __floats2half2_rn(a, b); }
#endif
#if defined(TP_WITH_BF16)
TP_HD __nv_bfloat162 rounded_pair(__nv_bfloat16, float a, float b) { return __floats2bfloat162_rn(a, b); }
#endif
template <class Pair> TP_HD unsigned bits_of(Pair p) {
  unsigned w;
  memcpy(&w, &p, sizeof w);
  return w;
}

// The least magnitude of a chain with no product inside: none (y's own is checked)
struct NoneInside {};
// The least of |y| and the magnitudes of the products inside the chain at slot f (NaN for a NaN y)
template <class Least> TP_HD float least_magnitude(float y, const Least& least, int f) {
  return min_nan(magnitude(y), least(f));
}
TP_HD float least_magnitude(float y, const NoneInside&, int) { return magnitude(y); }

// out[f] = each slot's estimate y[f] rounded to TD, and the slots whose rounding may differ from the
// exact chain's as bits. Where both ends of y's interval, y (1 - bound) and y (1 + bound), round to
// the same 16-bit value, so do y and the exact value (rounding is monotone): out[f] is that end's
// rounding, the exact bits. A slot is vouched for only where y's magnitude and the least of the
// products inside the chain are at least 2^-100 (relative bounds hold for normal floats; a NaN
// fails, an overflow gives inf or NaN), and an end past the 16-bit range gives inf, which both do
// only where every value between rounds to inf too. bound(f): slot f's bound; least(f): the least
// magnitude of the products inside the chain at slot f. Functions of the slot, not arrays, and each
// slot rounded and checked in turn, so that y[f] and what its bound reads die there (registers
// bound the chain's speed). Two slots at a time: their low ends in one conversion (the result
// pair, written as one word: out is aligned so, as the kernel frame declares 2-byte register arrays),
// their high ends in another.
template <class TD, int N, class Bound, class Least>
TP_HD unsigned rounded_estimates(TD (&out)[N], const float (&y)[N], const Bound& bound, const Least& least) {
  static_assert(N <= 32, "a slot a bit");
  using Pair = decltype(rounded_pair(TD{}, 0.0f, 0.0f));
  unsigned missed = 0;
  TP_UNROLL_BY(N)
  for (int f = 0; f < N; f += 2) {
    const int g = f + 1 < N ? f + 1 : f;  // an odd N's last slot pairs with itself
    const float bf = bound(f), bg = bound(g);
    const Pair low = rounded_pair(TD{}, fma(-y[f], bf, y[f]), fma(-y[g], bg, y[g]));
    const Pair high = rounded_pair(TD{}, fma(y[f], bf, y[f]), fma(y[g], bg, y[g]));
    if (g != f) {
      reinterpret_cast<Pair*>(out)[f / 2] = low;  // one word: no halves to pack again for the store
    } else {
      out[f] = low.x;
    }
    const unsigned differ = bits_of(low) ^ bits_of(high);  // slot f's half low, g's high
    const bool alike_f = (least_magnitude(y[f], least, f) >= 0x1p-100f) & ((differ & 0xffffu) == 0);
    const bool alike_g = (least_magnitude(y[g], least, g) >= 0x1p-100f) & ((differ >> 16) == 0);
    missed |= (alike_f ? 0u : 1u << f) | (alike_g ? 0u : 1u << g);
  }
  return missed;
}

// A program input's element at slot `bit` of this lane's registers (Place: their placement), read
// again from the input's tile in global memory: a missed slot's leaf, so that the registers need not
// stay live across the check for the rare path. A padded slot (no element) reads the tile's first.
template <class Place, class T> __device__ T input_at(const T* tile, int lane, unsigned bit) {
  const int e = Place::load_element(lane, __ffs(bit) - 1);
  return tile[e < 0 ? 0 : e];
}

// A chain's register arrays' slot `bit`, and a value put there (maps.cuh's)
template <class T, int N> TP_HD T slot_at(const T (&x)[N], unsigned bit) { return slot_at<N>(x, N, bit); }
template <class T, int N> TP_HD void set_slot(T (&x)[N], unsigned bit, T v) { set_slot<N>(x, N, bit, v); }

// silu or sigmoid of a bundle of 16-bit registers (maps.cuh's has_estimate): the chain of that one op
// rounded to 16 bits, as a program's (bound: a chain of no products' roundings, 3 u, then the op's), its
// missed slots the exact op, out of line. Slots past `slots` (a last group of fewer than
// kEstimateGroup) hold 1 with no bound: never missed, never written.
template <class Op, int kUnroll, class T> TP_HD void estimated_registers(T* dst, int slots, const RegOperand<T>& x) {
  float y[kEstimateGroup];
  TP_UNROLL_BY(kEstimateGroup)
  for (int f = 0; f < kEstimateGroup; ++f) y[f] = f < slots ? Estimated<Op>::fast(widen(x[f])) : 1.0f;
  const auto bound = [&](int f) { return f < slots ? Estimated<Op>::bound(widen(x[f]), 3.0f * kEstimateU) : 0.0f; };
  alignas(4) T rounded[kEstimateGroup];
  for (unsigned missed = rounded_estimates(rounded, y, bound, NoneInside{}); missed != 0; missed &= missed - 1) {
    const unsigned bit = missed & (0u - missed);
    set_slot(rounded, bit, apply_out_of_line<Op>(slot_at<kUnroll>(x, slots, bit)));
  }
  TP_UNROLL_BY(kUnroll)
  for (int f = 0; f < slots; ++f) dst[f] = rounded[f];
}
#endif

}  // namespace tp
