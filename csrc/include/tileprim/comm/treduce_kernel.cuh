// The GPU side of TREDUCE: CTAs take pieces of the chunks (grid-stride); in a piece each
// thread takes 16-byte vectors of a row (or single elements where the row is strided or not
// aligned), reads that vector from every rank, the root's first, and folds it with the fold of
// treduce.cuh. With ping-pong buffering every rank's load is in flight before the fold starts;
// with acc/recv each rank is loaded as the fold reaches it. The other GPUs' memory is read
// directly (peer access) and dst, on the root's GPU, is written directly, so the same kernel
// serves root_pull (on the root) and scatter_gather (on each worker, over its shard).
#pragma once
#include "treduce.cuh"

namespace tp {
namespace treduce {

// The kernel's one parameter, filled by the host (plain data: one layout on both sides).
struct Launch {
  const void* src[kMaxRanks];  // in fold order: the root, then the other ranks ascending
  void* dst;
  Geometry g;
  int ranks;
  int vectors;  // 1: every base pointer is 16-byte aligned and cols are contiguous in every tensor
  long long piece_begin, piece_end;  // this launch's pieces
};

#if TP_ON_DEVICE

template <class T> union Vector {
  static constexpr int kWidth = 16 / sizeof(T);
  uint4 raw;
  T value[kWidth];
};

// 16-byte accesses, spelled out so the compiler keeps them whole.
__device__ __forceinline__ uint4 load16(const void* p) {
  uint4 v;
  asm("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ void store16(void* p, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

template <class Op, class Acc, class T, bool kAllInFlight>
__device__ __forceinline__ void fold_vector(const Launch& a, long long s, long long d) {
  using V = Vector<T>;
  using S = Step<Op, Acc>;
  V out;
  if (kAllInFlight) {
    V in[kMaxRanks];
#pragma unroll
    for (int k = 0; k < kMaxRanks; ++k) {
      if (k < a.ranks) in[k].raw = load16(static_cast<const T*>(a.src[k]) + s);
    }
    // fold's steps with every index known at compile time, so `in` stays in registers
    Acc acc[V::kWidth];
#pragma unroll
    for (int e = 0; e < V::kWidth; ++e) acc[e] = S::first(in[0].value[e]);
#pragma unroll
    for (int k = 1; k < kMaxRanks; ++k) {
      if (k < a.ranks) {
#pragma unroll
        for (int e = 0; e < V::kWidth; ++e) acc[e] = S::next(acc[e], in[k].value[e]);
      }
    }
#pragma unroll
    for (int e = 0; e < V::kWidth; ++e) out.value[e] = S::template last<T>(acc[e]);
  } else {
    V recv;
    recv.raw = load16(static_cast<const T*>(a.src[0]) + s);
    Acc acc[V::kWidth];
#pragma unroll
    for (int e = 0; e < V::kWidth; ++e) acc[e] = S::first(recv.value[e]);
    for (int k = 1; k < a.ranks; ++k) {
      recv.raw = load16(static_cast<const T*>(a.src[k]) + s);
#pragma unroll
      for (int e = 0; e < V::kWidth; ++e) acc[e] = S::next(acc[e], recv.value[e]);
    }
#pragma unroll
    for (int e = 0; e < V::kWidth; ++e) out.value[e] = S::template last<T>(acc[e]);
  }
  store16(static_cast<T*>(a.dst) + d, out.raw);
}

template <class Op, class Acc, class T>
__device__ __forceinline__ void fold_element(const Launch& a, long long s, long long d) {
  static_cast<T*>(a.dst)[d] = fold<Op, Acc, T>(a.ranks, [&](int k) { return static_cast<const T*>(a.src[k])[s]; });
}

template <class Op, class Acc, class T, bool kAllInFlight>
__device__ void run_pieces(const Launch& a) {
  constexpr int W = Vector<T>::kWidth;
  const Geometry& g = a.g;
  for (long long piece = a.piece_begin + blockIdx.x; piece < a.piece_end; piece += gridDim.x) {
    const Piece p = locate(g, piece);
    const long long per_row = a.vectors ? (p.cols + W - 1) / W : p.cols;
    const long long items = p.rows * per_row;
    for (long long item = threadIdx.x; item < items; item += blockDim.x) {
      const long long row = item / per_row, at = item % per_row;
      if (!a.vectors) {
        fold_element<Op, Acc, T>(a, p.src + row * g.src[3] + at * g.src[4], p.dst + row * g.dst[3] + at * g.dst[4]);
        continue;
      }
      const long long col = at * W;
      const long long s = p.src + row * g.src[3] + col, d = p.dst + row * g.dst[3] + col;
      if (col + W <= p.cols && s % W == 0 && d % W == 0) {
        fold_vector<Op, Acc, T, kAllInFlight>(a, s, d);
      } else {
        const long long n = p.cols - col < W ? p.cols - col : W;
        for (long long e = 0; e < n; ++e) fold_element<Op, Acc, T>(a, s + e, d + e);
      }
    }
  }
}

#endif  // TP_ON_DEVICE

}  // namespace treduce
}  // namespace tp
