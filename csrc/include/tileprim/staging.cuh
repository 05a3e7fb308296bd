// Moving tiles between global memory and shared memory with 16-byte accesses, as the seeds'
// programs do before their primitives (global -> shared -> registers).
//  * Register tiles: a block's tiles are one contiguous run of global memory, which the whole
//    block copies to a staging area where element k sits at skewed(k) = k + k / 32; that keeps
//    the per-thread register gathers that follow free of bank conflicts for the common
//    strides (8, 32, ...).
//  * Row-major shared tiles: the block copies its run of them as it is.
// Data movement only: the CPU backend stages directly and gets the same values.
#pragma once
#include "config.cuh"

namespace tp {

TP_HD int skewed(int k) { return k + (k >> 5); }

// Shared-memory elements a staging area of n elements needs.
TP_HD int skewed_span(int n) { return n == 0 ? 0 : skewed(n - 1) + 1; }

#if TP_ON_DEVICE
template <bool kSkew> __device__ __forceinline__ int shared_index(int k) { return kSkew ? skewed(k) : k; }

// 16 bytes as one access or as their elements.
template <class T> union Vector16 {
  uint4 raw;
  T values[16 / sizeof(T)];
};

// How many whole 16-byte vectors of the n elements at `global` move as vectors: none unless it
// is 16-byte aligned (the rest move one by one).
template <class T> __device__ __forceinline__ int aligned_vectors(const T* global, int n) {
  return reinterpret_cast<unsigned long long>(global) % 16 == 0 ? n / static_cast<int>(16 / sizeof(T)) : 0;
}

// Threads `first, first + stride, ...` copy n elements global -> shared.
template <bool kSkew, class T>
__device__ __forceinline__ void copy_to_shared(T* smem, const T* global, int n, int first, int stride) {
  constexpr int kPerVector = 16 / sizeof(T);
  const int vectors = aligned_vectors(global, n);
  const uint4* src = reinterpret_cast<const uint4*>(global);
  // kBatch loads in flight per thread before their stores: what keeps HBM busy when a block is
  // one of a few on its SM.
  constexpr int kBatch = 8;
  for (int v0 = first; v0 < vectors; v0 += kBatch * stride) {
    Vector16<T> u[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (v0 + b * stride < vectors) u[b].raw = __ldg(src + v0 + b * stride);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int v = v0 + b * stride;
      if (v >= vectors) break;
#pragma unroll
      for (int j = 0; j < kPerVector; ++j) smem[shared_index<kSkew>(v * kPerVector + j)] = u[b].values[j];
    }
  }
  for (int k = vectors * kPerVector + first; k < n; k += stride) smem[shared_index<kSkew>(k)] = global[k];
}

// Threads `first, first + stride, ...` copy n elements shared -> global.
template <bool kSkew, class T>
__device__ __forceinline__ void copy_from_shared(T* global, const T* smem, int n, int first, int stride) {
  constexpr int kPerVector = 16 / sizeof(T);
  const int vectors = aligned_vectors(global, n);
  uint4* dst = reinterpret_cast<uint4*>(global);
  for (int v = first; v < vectors; v += stride) {
    Vector16<T> u;
#pragma unroll
    for (int j = 0; j < kPerVector; ++j) u.values[j] = smem[shared_index<kSkew>(v * kPerVector + j)];
    dst[v] = u.raw;
  }
  for (int k = vectors * kPerVector + first; k < n; k += stride) global[k] = smem[shared_index<kSkew>(k)];
}

// A thread's register tile of at most 16 bytes from and to global memory: one vector access
// where it is 16 bytes at an address that allows it, element by element otherwise.
template <class T, int N> __device__ __forceinline__ void load_vector(T (&regs)[N], const T* global) {
  if constexpr (N * sizeof(T) == 16) {
    if (reinterpret_cast<unsigned long long>(global) % 16 == 0) {
      Vector16<T> u;
      u.raw = __ldg(reinterpret_cast<const uint4*>(global));
#pragma unroll
      for (int j = 0; j < N; ++j) regs[j] = u.values[j];
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < N; ++j) regs[j] = global[j];
}
template <class T, int N> __device__ __forceinline__ void store_vector(T* global, const T (&regs)[N]) {
  if constexpr (N * sizeof(T) == 16) {
    if (reinterpret_cast<unsigned long long>(global) % 16 == 0) {
      Vector16<T> u;
#pragma unroll
      for (int j = 0; j < N; ++j) u.values[j] = regs[j];
      *reinterpret_cast<uint4*>(global) = u.raw;
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < N; ++j) global[j] = regs[j];
}
#endif

}  // namespace tp
