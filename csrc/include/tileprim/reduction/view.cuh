// ReduceView: which slots a reduction folds. Output k (row-major over the spatial dims
// this thread or tile holds) folds source j (row-major over the reduced dims), in order:
//   dst slot  = memory_offset(dst, k)
//   src slots = memory_offset(src, k * reduce + j),  j = 0 .. reduce-1
// `src` lists the source's memory iters with the spatial dims' iters first, so one flat
// index walks both. Slots are registers (kUnroll = kUnrollRegisters: every index folds to a
// constant) or shared-memory offsets (kUnroll = kUnrollMemory).
#pragma once
#include "../layout.cuh"

namespace tp {

template <int kUnrollBy>
struct ReduceView {
  static constexpr int kUnroll = kUnrollBy;
  int spatial;  // outputs
  int reduce;   // sources folded into each output
  MemLayout src;
  MemLayout dst;

  TP_HD long long dst_slot(int k) const { return memory_offset(dst, k); }
  TP_HD long long src_slot(int k, int j) const {
    return memory_offset(src, static_cast<long long>(k) * reduce + j);
  }
};

}  // namespace tp
