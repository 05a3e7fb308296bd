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

// A warp's run window (WindowRun) takes, per chunk, 8 vectors of 16 bytes of each lane's run.
constexpr int kWindowVectors = 8;
constexpr int kWindowSlotBytes = 32 * kWindowVectors * 16;

#if TP_ON_DEVICE
template <bool kSkew> __device__ __forceinline__ int shared_index(int k) { return kSkew ? skewed(k) : k; }

// 16 bytes as one access or as their elements.
template <class T> union Vector16 {
  uint4 raw;
  T values[16 / sizeof(T)];

  // Element k by selects: a constant k folds to its register, and a run-time k (a fold's last
  // steps past its unrolled ones) does not index the array, which would put it in local memory.
  __device__ __forceinline__ T at(int k) const {
    T picked = values[0];
#pragma unroll
    for (int e = 1; e < 16 / static_cast<int>(sizeof(T)); ++e) {
      if (k == e) picked = values[e];
    }
    return picked;
  }
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

// One run of kBytes (4, 8 or 16, both ends aligned for it) copied global -> shared without
// passing through registers, in flight until wait_async (16 bytes bypass L1: .cg).
template <int kBytes> __device__ __forceinline__ void copy_run_async(void* to, const void* from) {
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(to));
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(at), "l"(from) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(at), "l"(from), "n"(kBytes) : "memory");
  }
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
  static constexpr int kFoldUnroll = 128 / sizeof(T);  // a fold's step: 8 vectors in flight
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
      return u.at(static_cast<int>(i % kPerVector));
    } else {
      return __ldg(at + i);
    }
  }
};

// body(views...) over runs of global memory each read in place as the body folds it: by 16-byte
// vectors where every run is aligned, else element by element.
template <class Body, class... T> __device__ __forceinline__ void read_in_place(Body body, const T*... runs) {
  if ((aligned16(runs) && ...)) {
    body(GlobalRun<T, true>{runs}...);
  } else {
    body(GlobalRun<T, false>{runs}...);
  }
}

// The 32 runs of a warp's lanes (lane l walks run l in order, as a fold does), streamed through
// the warp's shared-memory window: for each chunk of 128 bytes per run, the warp copies all 32
// runs' chunk with 16-byte cp.async, 8 lanes per 128-byte line (4 lines per instruction where a
// GlobalRun load touches 32), kStages chunks ahead; each lane then reads its own run's chunk,
// 16-byte slots swizzled by lane so that 8 lanes' vector reads fall in distinct banks. An H100
// over 1 GiB: rows of 1024 floats 2.88 TB/s against 2.18 read in place; runs of 256: 2.90
// against 2.02. Every lane of the warp must index its run from 0 up, each element in turn
// (chunks advance with __syncwarp; 2-byte elements: each vector from its first element), and
// every run be 16-byte aligned. `window` holds kStages * kSlotBytes bytes for this warp. A copy
// of the view shares its window: the body folds through one copy.
template <class T, int kStages> struct WindowRun {
  static constexpr int kPerVector = 16 / sizeof(T);
  static constexpr int kVectors = kWindowVectors;  // per run per chunk
  static constexpr int kChunk = kVectors * kPerVector;
  static constexpr int kSlotBytes = kWindowSlotBytes;
  static constexpr int kFoldUnroll = kChunk;  // a fold's step: one chunk, its first read known
  const char* window;
  const T* rows[kVectors];  // the runs this lane copies vector `lane % 8` of: 4 * i + lane / 8
  int vectors;              // 16-byte vectors in a run
  int lane;
  mutable int chunk;        // the chunk the window holds for reading
  mutable Vector16<T> held;  // 2-byte elements: the vector being read

  __device__ __forceinline__ WindowRun(char* window_, const T* run, long long elements, int lane_)
      : window(window_), vectors(static_cast<int>((elements + kPerVector - 1) / kPerVector)), lane(lane_), chunk(-1) {
#pragma unroll
    for (int i = 0; i < kVectors; ++i) rows[i] = reinterpret_cast<const T*>(__shfl_sync(~0u,
        reinterpret_cast<unsigned long long>(run), 4 * i + lane / 8));
    __syncwarp();  // the window's last reader (an earlier tile) is done with it
#pragma unroll
    for (int c = 0; c < kStages - 1; ++c) copy(c);
  }

  __device__ __forceinline__ T operator[](long long i) const {
    const int c = static_cast<int>(i / kChunk), at = static_cast<int>(i % kChunk);
    if (at == 0 && chunk < c) advance();  // a chunk's first element is read first, once folded (unrolled) away
    if constexpr (sizeof(T) == 2) {  // 32-bit reads by 32 lanes would conflict 4 ways: read the vector whole, once
      if (at % kPerVector == 0) held.raw = vector(c, at);
      return held.at(at % kPerVector);
    } else {  // an unrolled fold's reads of one vector merge into one 16-byte read
      Vector16<T> u;
      u.raw = vector(c, at);
      return u.at(at % kPerVector);
    }
  }

  __device__ __forceinline__ uint4 vector(int c, int at) const {
    return *reinterpret_cast<const uint4*>(window + (c % kStages) * kSlotBytes + lane * (kVectors * 16) +
                                           ((at / kPerVector) ^ (lane % kVectors)) * 16);
  }

  // The next chunk readable: the slot read last is refilled kStages - 1 chunks ahead.
  __device__ __forceinline__ void advance() const {
    __syncwarp();
    copy(chunk + kStages);
    wait_async(kStages - 1);
    __syncwarp();
    ++chunk;
  }

  // One commit group: chunk c of every run (empty past the runs' end).
  __device__ __forceinline__ void copy(int c) const {
    const int vec = lane % kVectors, v = c * kVectors + vec;
    const char* slot = window + (c % kStages) * kSlotBytes;
#pragma unroll
    for (int i = 0; i < kVectors; ++i) {
      const int row = 4 * i + lane / kVectors;
      if (v < vectors) {
        const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(slot + row * (kVectors * 16) + (vec ^ (row % kVectors)) * 16));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(rows[i] + v * kPerVector) : "memory");
      }
    }
    commit_async();
  }
};

// A word W of consecutive elements at an address that may not be aligned for one access, element
// by element: out of line, so that the aligned path neither carries these loads predicated off
// nor holds its elements apart to meet theirs (a 16-bit element in a register of its own, moved
// out of the word first)
template <class W, class T> __device__ __noinline__ W load_unaligned(const T* p) {
  union {
    W word;
    T values[sizeof(W) / sizeof(T)];
  } u;
#pragma unroll
  for (int j = 0; j < static_cast<int>(sizeof(W) / sizeof(T)); ++j) u.values[j] = p[j];
  return u.word;
}

// A thread's run of N consecutive elements from and to global memory: whole 16-byte vectors
// where the run's length allows (at an unaligned address, each read by load_unaligned),
// element by element otherwise.
template <class T, int N> __device__ __forceinline__ void load_run(T (&regs)[N], const T* global) {
  constexpr int kPerVector = 16 / sizeof(T);
  if constexpr (N % kPerVector == 0) {
    const bool aligned = aligned16(global);
#pragma unroll
    for (int v = 0; v < N / kPerVector; ++v) {
      Vector16<T> u;
      u.raw = aligned ? __ldg(reinterpret_cast<const uint4*>(global) + v) : load_unaligned<uint4>(global + v * kPerVector);
#pragma unroll
      for (int j = 0; j < kPerVector; ++j) regs[v * kPerVector + j] = u.values[j];
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) regs[j] = global[j];
  }
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
