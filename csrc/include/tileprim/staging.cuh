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

__device__ __forceinline__ bool aligned16(const void* p) {
  return reinterpret_cast<unsigned long long>(p) % 16 == 0;
}

// How many whole 16-byte vectors of the n elements at `global` move as vectors: none unless it
// is 16-byte aligned (the rest move one by one).
template <class T> __device__ __forceinline__ int aligned_vectors(const T* global, int n) {
  return aligned16(global) ? n / static_cast<int>(16 / sizeof(T)) : 0;
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

// Threads `first, first + stride, ...` start copying n elements global -> shared without
// holding them in registers (cp.async, sm_80 and later): every 16-byte vector is in flight at
// once, so a block's run of tiles loads while it computes on the part already there.
// commit_async closes the copies issued so far into one group; wait_async waits for groups.
// Vectors only where both runs are 16-byte aligned; the rest moves element by element, done
// before the barrier that follows wait_async.
template <class T>
__device__ __forceinline__ void copy_to_shared_async(T* smem, const T* global, int n, int first, int stride) {
  constexpr int kPerVector = 16 / sizeof(T);
  const int vectors = aligned16(smem) ? aligned_vectors(global, n) : 0;
  for (int v = first; v < vectors; v += stride) {
    const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(smem + v * kPerVector));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(global + v * kPerVector) : "memory");
  }
  for (int k = vectors * kPerVector + first; k < n; k += stride) smem[k] = global[k];
}

__device__ __forceinline__ void commit_async() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most `pending` of this thread's commit groups are still in flight (the
// newest ones); a block barrier after it makes every thread's copies visible.
__device__ __forceinline__ void wait_async(int pending) {
  switch (pending) {  // the count is an immediate: one case per pipeline depth the frame uses
    case 0: asm volatile("cp.async.wait_group 0;\n" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;\n" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 3;\n" ::: "memory"); break;
  }
}

// A thread's run of a large register tile, read from global memory where the body indexes it
// instead of being loaded into an array first (an array of hundreds of elements would live in
// local memory). kVectors: the run is 16-byte aligned and each index reads its 16-byte vector;
// the vectors of one unrolled fold are the same loads, which the compiler merges. Each load
// asks L2 to fetch its whole 128-byte line from DRAM (sm_75+): every thread walks its own
// run, and whole-line requests keep DRAM efficient where 32-byte ones do not (an H100: 1.98
// against 1.72 TB/s on 4 KiB runs).
template <class T, bool kVectors> struct GlobalRun {
  const T* __restrict__ at;
  __device__ __forceinline__ T operator[](long long i) const {
    if constexpr (kVectors) {
      constexpr int kPerVector = 16 / sizeof(T);
      Vector16<T> u;
      const uint4* vector = reinterpret_cast<const uint4*>(at) + i / kPerVector;
#if __CUDA_ARCH__ >= 750
      asm("ld.global.nc.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];"
          : "=r"(u.raw.x), "=r"(u.raw.y), "=r"(u.raw.z), "=r"(u.raw.w)
          : "l"(vector));
#else
      u.raw = __ldg(vector);
#endif
      return u.values[i % kPerVector];
    } else {
      return __ldg(at + i);
    }
  }
};

// A thread's run of N consecutive elements from and to global memory: whole 16-byte vectors
// where the run's length and address allow, element by element otherwise.
template <class T, int N> __device__ __forceinline__ void load_run(T (&regs)[N], const T* global) {
  constexpr int kPerVector = 16 / sizeof(T);
  if constexpr (N % kPerVector == 0) {
    if (aligned16(global)) {
#pragma unroll
      for (int v = 0; v < N / kPerVector; ++v) {
        Vector16<T> u;
        u.raw = __ldg(reinterpret_cast<const uint4*>(global) + v);
#pragma unroll
        for (int j = 0; j < kPerVector; ++j) regs[v * kPerVector + j] = u.values[j];
      }
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < N; ++j) regs[j] = global[j];
}
template <class T, int N> __device__ __forceinline__ void store_run(T* global, const T (&regs)[N]) {
  constexpr int kPerVector = 16 / sizeof(T);
  if constexpr (N % kPerVector == 0) {
    if (aligned16(global)) {
#pragma unroll
      for (int v = 0; v < N / kPerVector; ++v) {
        Vector16<T> u;
#pragma unroll
        for (int j = 0; j < kPerVector; ++j) u.values[j] = regs[v * kPerVector + j];
        reinterpret_cast<uint4*>(global)[v] = u.raw;
      }
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < N; ++j) global[j] = regs[j];
}
#endif

}  // namespace tp
