// Moving a block's tiles between global memory and shared memory, as the seeds' programs
// do before their register primitives (global -> shared -> registers). A block's tiles are
// one contiguous run of global memory, so the whole block copies it with 16-byte accesses;
// in shared memory element k sits at skewed(k) = k + k / 32, which keeps the per-thread
// register gathers that follow free of bank conflicts for the common strides (8, 32, ...).
// Data movement only: the CPU backend stages directly and gets the same values.
#pragma once
#include "config.cuh"

namespace tp {

TP_HD int skewed(int k) { return k + (k >> 5); }

// Shared-memory elements a staging area of n elements needs.
TP_HD int skewed_span(int n) { return n == 0 ? 0 : skewed(n - 1) + 1; }

#if TP_ON_DEVICE
template <class T>
__device__ __forceinline__ void block_load(T* smem, const T* global, int n) {
  constexpr int kPerVector = 16 / sizeof(T);
  int done = 0;
  if (reinterpret_cast<unsigned long long>(global) % 16 == 0) {
    const int vectors = n / kPerVector;
    const uint4* src = reinterpret_cast<const uint4*>(global);
    for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
      union {
        uint4 raw;
        T values[kPerVector];
      } u;
      u.raw = __ldg(src + v);
#pragma unroll
      for (int j = 0; j < kPerVector; ++j) smem[skewed(v * kPerVector + j)] = u.values[j];
    }
    done = vectors * kPerVector;
  }
  for (int k = done + threadIdx.x; k < n; k += blockDim.x) smem[skewed(k)] = global[k];
}

template <class T>
__device__ __forceinline__ void block_store(T* global, const T* smem, int n) {
  constexpr int kPerVector = 16 / sizeof(T);
  int done = 0;
  if (reinterpret_cast<unsigned long long>(global) % 16 == 0) {
    const int vectors = n / kPerVector;
    uint4* dst = reinterpret_cast<uint4*>(global);
    for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
      union {
        uint4 raw;
        T values[kPerVector];
      } u;
#pragma unroll
      for (int j = 0; j < kPerVector; ++j) u.values[j] = smem[skewed(v * kPerVector + j)];
      dst[v] = u.raw;
    }
    done = vectors * kPerVector;
  }
  for (int k = done + threadIdx.x; k < n; k += blockDim.x) global[k] = smem[skewed(k)];
}
#endif

}  // namespace tp
