// One thread reduces its own slots (reduction -> local at thread scope, reduction -> shared
// at thread scope): for each output, start from the identity (or, with accum, from the old
// output) and fold the sources in order. No communication. `src` is the thread's registers,
// or anything indexed like them (a run read from global memory as it is folded).
#pragma once
#include "view.cuh"

namespace tp {

template <class Op, class T, class Src, class View, int kUnroll = View::kUnroll>
TP_HD void thread_reduce(T* dst, Src src, const View& v, bool accum) {
  [[maybe_unused]] constexpr int kSrcUnroll = fold_unroll<Src>(kUnroll, 0);
  TP_UNROLL_BY(kUnroll)
  for (int k = 0; k < v.spatial; ++k) {
    T acc = accum ? dst[v.dst_slot(k)] : Op::template identity<T>();
    TP_UNROLL_BY(kSrcUnroll)
    for (int j = 0; j < v.reduce; ++j) acc = Op::apply(acc, src[v.src_slot(k, j)]);
    dst[v.dst_slot(k)] = acc;
  }
}

}  // namespace tp
