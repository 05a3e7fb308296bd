// reduction -> sm100_packed: one thread folds a 1-D float32 register vector (>= 8 elements)
// into a scalar with Blackwell's packed instructions.
//   sum:     8 slots; add.rn.ftz.f32x2 over each further chunk of 8; scalar remainder into
//            slot 0; 8 -> 4 -> 2 -> 1 with packed adds; a final scalar add.
//   max/min: 4 slots, each folding two new elements per chunk with a 3-input max/min.f32.
// Built for an older GPU (or TP_EMULATE_SM100), each packed instruction becomes the same
// operation spelled in sm_90 instructions: add.rn.ftz.f32x2 -> two add.rn.ftz.f32, a
// 3-input max -> two nested 2-input ones. The host does the same steps.
#pragma once
#include "ops.cuh"
#include "view.cuh"

#if TP_ON_DEVICE && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000 && !defined(TP_EMULATE_SM100)
#define TP_SM100_PACKED_NATIVE 1
#else
#define TP_SM100_PACKED_NATIVE 0
#endif

namespace tp {
namespace packed {

// (d0, d1) = (a0 + b0, a1 + b1), round to nearest, subnormal inputs and results flushed.
TP_HD void add_f32x2_ftz(float& d0, float& d1, float a0, float a1, float b0, float b1) {
#if TP_SM100_PACKED_NATIVE
  unsigned long long a, b, d;
  asm("mov.b64 %0, {%1, %2};" : "=l"(a) : "f"(a0), "f"(a1));
  asm("mov.b64 %0, {%1, %2};" : "=l"(b) : "f"(b0), "f"(b1));
  asm("add.rn.ftz.f32x2 %0, %1, %2;" : "=l"(d) : "l"(a), "l"(b));
  asm("mov.b64 {%0, %1}, %2;" : "=f"(d0), "=f"(d1) : "l"(d));
#elif TP_ON_DEVICE
  asm("add.rn.ftz.f32 %0, %1, %2;" : "=f"(d0) : "f"(a0), "f"(b0));
  asm("add.rn.ftz.f32 %0, %1, %2;" : "=f"(d1) : "f"(a1), "f"(b1));
#else
  d0 = flush_subnormal(flush_subnormal(a0) + flush_subnormal(b0));
  d1 = flush_subnormal(flush_subnormal(a1) + flush_subnormal(b1));
#endif
}

// The 3-input max/min.f32 of each reduction operator.
template <class Op> struct three;
#if TP_SM100_PACKED_NATIVE
#define TP_THREE_INPUT(OP, INSTR)                                                   \
  template <> struct three<reduce_op::OP> {                                         \
    static TP_HD float apply(float a, float b, float c) {                           \
      float d;                                                                      \
      asm(INSTR " %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c));             \
      return d;                                                                     \
    }                                                                               \
  };
#else
#define TP_THREE_INPUT(OP, INSTR)                                                   \
  template <> struct three<reduce_op::OP> {                                         \
    static TP_HD float apply(float a, float b, float c) {                           \
      return reduce_op::OP::apply(reduce_op::OP::apply(a, b), c);                   \
    }                                                                               \
  };
#endif
TP_THREE_INPUT(Max, "max.f32")
TP_THREE_INPUT(Min, "min.f32")
TP_THREE_INPUT(MaxNaN, "max.NaN.f32")
TP_THREE_INPUT(MinNaN, "min.NaN.f32")
#undef TP_THREE_INPUT

}  // namespace packed

template <class Src, class View, int kUnroll = View::kUnroll>
TP_HD void packed_add_sum(float* dst, Src src, const View& v, bool accum) {
  [[maybe_unused]] constexpr int kSrcUnroll = fold_unroll<Src>(kUnroll, 0);  // elements; the loops below step by 8
  const int n = v.reduce;
  const int full = n / 8;
  float acc[8];
  TP_UNROLL
  for (int i = 0; i < 8; ++i) acc[i] = src[v.src_slot(0, i)];
  if (accum) acc[0] = add(src[v.src_slot(0, 0)], dst[v.dst_slot(0)]);
  TP_UNROLL_BY(kSrcUnroll / 8 > 0 ? kSrcUnroll / 8 : 1)
  for (int c = 1; c < full; ++c) {
    TP_UNROLL
    for (int p = 0; p < 4; ++p) {
      packed::add_f32x2_ftz(acc[2 * p], acc[2 * p + 1], acc[2 * p], acc[2 * p + 1],
                            src[v.src_slot(0, 8 * c + 2 * p)], src[v.src_slot(0, 8 * c + 2 * p + 1)]);
    }
  }
  TP_UNROLL_BY(kSrcUnroll)
  for (int i = 8 * full; i < n; ++i) acc[0] = add(acc[0], src[v.src_slot(0, i)]);
  packed::add_f32x2_ftz(acc[0], acc[1], acc[0], acc[1], acc[2], acc[3]);
  packed::add_f32x2_ftz(acc[4], acc[5], acc[4], acc[5], acc[6], acc[7]);
  packed::add_f32x2_ftz(acc[0], acc[1], acc[0], acc[1], acc[4], acc[5]);
  dst[v.dst_slot(0)] = add(acc[0], acc[1]);
}

template <class Op, class Src, class View, int kUnroll = View::kUnroll>
TP_HD void packed_three_input_maxmin(float* dst, Src src, const View& v, bool accum) {
  [[maybe_unused]] constexpr int kSrcUnroll = fold_unroll<Src>(kUnroll, 0);  // elements; the loops below step by 8
  using Three = packed::three<Op>;
  const int n = v.reduce;
  const int full = n / 8;
  float t[4];
  TP_UNROLL
  for (int i = 0; i < 4; ++i) t[i] = Op::apply(src[v.src_slot(0, 2 * i)], src[v.src_slot(0, 2 * i + 1)]);
  if (accum) t[0] = Three::apply(src[v.src_slot(0, 0)], src[v.src_slot(0, 1)], dst[v.dst_slot(0)]);
  TP_UNROLL_BY(kSrcUnroll / 8 > 0 ? kSrcUnroll / 8 : 1)
  for (int c = 1; c < full; ++c) {
    TP_UNROLL
    for (int i = 0; i < 4; ++i) {
      t[i] = Three::apply(t[i], src[v.src_slot(0, 8 * c + 2 * i)], src[v.src_slot(0, 8 * c + 2 * i + 1)]);
    }
  }
  TP_UNROLL_BY(kSrcUnroll)
  for (int i = 8 * full; i < n; ++i) t[0] = Op::apply(t[0], src[v.src_slot(0, i)]);
  dst[v.dst_slot(0)] = Three::apply(Op::apply(t[0], t[1]), t[2], t[3]);
}

// The packed fold of each operator: sum's packed adds, max/min's 3-input forms; kServed is
// false for any other operator (sm100_packed's op predicate turns those calls away).
template <class Op> struct packed_fold {
  static constexpr bool kServed = false;
};
template <> struct packed_fold<reduce_op::Sum> {
  static constexpr bool kServed = true;
  template <class Src, class View> static TP_HD void run(float* dst, Src src, const View& v, bool accum) {
    packed_add_sum(dst, src, v, accum);
  }
};
template <class Op> struct packed_three_input_fold {
  static constexpr bool kServed = true;
  template <class Src, class View> static TP_HD void run(float* dst, Src src, const View& v, bool accum) {
    packed_three_input_maxmin<Op>(dst, src, v, accum);
  }
};
template <> struct packed_fold<reduce_op::Max> : packed_three_input_fold<reduce_op::Max> {};
template <> struct packed_fold<reduce_op::Min> : packed_three_input_fold<reduce_op::Min> {};
template <> struct packed_fold<reduce_op::MaxNaN> : packed_three_input_fold<reduce_op::MaxNaN> {};
template <> struct packed_fold<reduce_op::MinNaN> : packed_three_input_fold<reduce_op::MinNaN> {};

}  // namespace tp
