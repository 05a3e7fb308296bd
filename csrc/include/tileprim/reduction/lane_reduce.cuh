// reduction -> local at warp / warpgroup scope: each lane folds its own registers, then an
// XOR butterfly folds across the lanes that hold parts of the same output (none when the
// reduced dims live in registers only), then accum folds the old output in once. `src_regs`
// may also be a run read from global memory as it is folded (large per-lane tiles on the GPU).
#pragma once
#include "butterfly.cuh"
#include "ops.cuh"
#include "view.cuh"

namespace tp {

template <class Op, class T, class Lanes, class Src, class View, int kUnroll = View::kUnroll>
TP_HD void lane_reduce(const Lanes& g, T* dst_regs, int dst_stride, Src src_regs, int src_stride,
                       const View& v, const ShuffleMasks& sh, bool accum) {
  [[maybe_unused]] constexpr int kSrcUnroll = fold_unroll<Src>(kUnroll, 0);
  TP_UNROLL_BY(kUnroll)
  for (int k = 0; k < v.spatial; ++k) {
    auto part = g.map([&](int lane) {
      const auto src = g.regs(src_regs, src_stride, lane);
      T acc = Op::template identity<T>();
      int j = 0;
      if constexpr (FoldsPairs<Op, T>::value) {
        using Two = typename TwoLanes<T>::type;
        Two pair(acc, acc);
        TP_UNROLL_BY(kSrcUnroll)
        for (; j + 1 < v.reduce; j += 2) pair = Op::apply(pair, Two(src[v.src_slot(k, j)], src[v.src_slot(k, j + 1)]));
        acc = Op::apply(pair.x, pair.y);
      }
      TP_UNROLL_BY(kSrcUnroll)
      for (; j < v.reduce; ++j) acc = Op::apply(acc, src[v.src_slot(k, j)]);
      return acc;
    });
    auto total = butterfly<Op>(g, part, sh);
    g.each([&](int lane) {
      T& out = g.regs(dst_regs, dst_stride, lane)[v.dst_slot(k)];
      const T r = g.at(total, lane);
      out = accum ? Op::apply(out, r) : r;
    });
  }
}

// lane_reduce over a source a lane gets a run at a time (a program's rows in passes): each run
// folded into the lane's `part` (the identity before the first) in order, then butterfly<Op> over
// the parts: the same bits as lane_reduce where its view takes the lane's slots in order.
template <class Op, class T, int N> TP_HD void fold_run(T& part, const T (&run)[N]) {
  TP_UNROLL
  for (int j = 0; j < N; ++j) part = Op::apply(part, run[j]);
}

}  // namespace tp
