// The GPU side of TREDUCE: CTAs take pieces of the chunks (grid-stride); in a piece each
// thread takes 16-byte vectors of a row (or single elements where the row is strided or not
// aligned), reads that vector from every rank, the root's first, and folds it with the fold of
// treduce.cuh. With ping-pong buffering every rank's load is in flight before the fold starts;
// with acc/recv each rank is loaded as the fold reaches it. The other GPUs' memory is read
// directly (peer access) and dst, on the root's GPU, is written directly, so the same kernel
// serves root_pull (on the root) and scatter_gather (on each worker, over its shard). With
// signal pads the kernel orders itself: it starts once every rank is ready and, done, keeps its
// own stream until every worker is done (signals.cuh); without them the host orders it.
#pragma once
#include "signals.cuh"
#include "treduce.cuh"

namespace tp {
namespace treduce {

// The kernel's one parameter, filled by the host (plain data: one layout on both sides).
struct Launch {
  const void* src[kMaxGroupSize];  // in fold order: the root, then the other ranks ascending
  void* dst;
  Geometry g;
  int ranks;
  int vectors;  // 1: every base pointer is 16-byte aligned and cols are contiguous in every tensor
  long long piece_begin, piece_end;      // this launch's pieces
  int pieces_per_step;                   // how many a CTA folds at once (kMaxPiecesPerStep at most)
  signals::Pad* pads[kMaxGroupSize];     // rank r's pad; pads[self] null: the host orders the call with events
  unsigned* arrivals;                    // this worker's count of finished CTAs (its own memory)
  unsigned long long epoch;              // this call's number
  unsigned long long timeout_ns;         // a wait for another rank longer than this traps
  const unsigned long long* abandoned;   // host memory: this rank gave up on calls up to this one; or null
  int self;                              // the worker's rank
  unsigned workers;                      // bit r: rank r is a worker
  unsigned ready;                        // bit r: the host knows rank r's data complete (no wait for it)
};

// A CTA folds several pieces at once where they are small (narrow or short chunks: a 1-D
// tensor's are 1 x 256), so that its threads have about this many elements to share.
constexpr long long kStepElements = 4096;
constexpr int kMaxPiecesPerStep = 64;

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

// Vectors each thread keeps in flight at once: NVLink reads take microseconds to come back.
constexpr int kVectorsPerThread = 4;

// kVectorsPerThread vectors at element offsets s[u] (sources) and d[u] (dst), bit u of valid: loaded
// from every rank (all at once with ping-pong buffers; rank by rank, all vectors at once, with
// acc/recv), folded with fold's steps (every index known at compile time, so the values stay
// in registers), stored whole.
template <class Op, class Acc, class T, int kRanks, bool kAllInFlight>
__device__ __forceinline__ void fold_vectors(const Launch& a, const long long* s, const long long* d, unsigned valid) {
  using V = Vector<T>;
  using S = Step<Op, Acc>;
  constexpr int U = kVectorsPerThread, W = V::kWidth;
  Acc acc[U][W];
  if (kAllInFlight) {
    V in[kRanks][U];
#pragma unroll
    for (int k = 0; k < kRanks; ++k) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (valid >> u & 1u) in[k][u].raw = load16(static_cast<const T*>(a.src[k]) + s[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int e = 0; e < W; ++e) {
        acc[u][e] = S::first(in[0][u].value[e]);
#pragma unroll
        for (int k = 1; k < kRanks; ++k) acc[u][e] = S::next(acc[u][e], in[k][u].value[e]);
      }
    }
  } else {
#pragma unroll
    for (int k = 0; k < kRanks; ++k) {
      V recv[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (valid >> u & 1u) recv[u].raw = load16(static_cast<const T*>(a.src[k]) + s[u]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int e = 0; e < W; ++e) acc[u][e] = k == 0 ? S::first(recv[u].value[e]) : S::next(acc[u][e], recv[u].value[e]);
      }
    }
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (!(valid >> u & 1u)) continue;
    V out;
#pragma unroll
    for (int e = 0; e < W; ++e) out.value[e] = S::template last<T>(acc[u][e]);
    store16(static_cast<T*>(a.dst) + d[u], out.raw);
  }
}

template <class Op, class Acc, class T>
__device__ __forceinline__ void fold_element(const Launch& a, long long s, long long d) {
  static_cast<T*>(a.dst)[d] = fold<Op, Acc, T>(a.ranks, [&](int k) { return static_cast<const T*>(a.src[k])[s]; });
}

// A step's items: the 16-byte vectors of its pieces' rows (or single elements where a tensor is
// strided along cols or not 16-byte aligned), each piece in a slot of a whole piece's items (a
// piece at a chunk's ragged end leaves part of its slot unused). Thread t takes items t,
// t + blockDim.x, ..., in groups of kVectorsPerThread.
template <class Op, class Acc, class T, int kRanks, bool kAllInFlight>
__device__ void run_pieces(const Launch& a) {
  constexpr int W = Vector<T>::kWidth, U = kVectorsPerThread;
  const Geometry& g = a.g;
  __shared__ Piece pieces[kMaxPiecesPerStep];
  const long long whole_cols = g.tile_cols < g.shape[4] ? g.tile_cols : g.shape[4];
  const long long slot_row = a.vectors ? (whole_cols + W - 1) / W : whole_cols;
  const long long slot = g.rows_per_piece * slot_row;
  const long long stride = static_cast<long long>(gridDim.x) * a.pieces_per_step;
  for (long long step = a.piece_begin + blockIdx.x * static_cast<long long>(a.pieces_per_step); step < a.piece_end;
       step += stride) {
    const long long here = a.piece_end - step < a.pieces_per_step ? a.piece_end - step : a.pieces_per_step;
    __syncthreads();  // every thread is done with the last step's pieces
    if (threadIdx.x < here) pieces[threadIdx.x] = locate(g, step + threadIdx.x);
    __syncthreads();
    const long long items = here * slot;
    for (long long first = threadIdx.x; first < items; first += static_cast<long long>(blockDim.x) * U) {
      long long s[U], d[U], count[U];
      unsigned valid = 0;  // bit u: item u is in its piece
      bool whole = a.vectors;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const long long item = first + static_cast<long long>(u) * blockDim.x;
        if (item >= items) break;
        const long long j = item / slot, row = (item - j * slot) / slot_row;
        const long long at = item - j * slot - row * slot_row;
        const Piece& p = pieces[j];
        const long long col = a.vectors ? at * W : at;
        if (row >= p.rows || col >= p.cols) continue;  // past a ragged piece's end
        s[u] = p.src + row * g.src[3] + col * g.src[4];
        d[u] = p.dst + row * g.dst[3] + col * g.dst[4];
        count[u] = a.vectors ? (p.cols - col < W ? p.cols - col : W) : 1;
        whole = whole && count[u] == W && s[u] % W == 0 && d[u] % W == 0;
        valid |= 1u << u;
      }
      if (whole) {
        fold_vectors<Op, Acc, T, kRanks, kAllInFlight>(a, s, d, valid);
        continue;
      }
      for (int u = 0; u < U; ++u) {  // a row's ragged end, or strided or unaligned: element by element
        if (!(valid >> u & 1u)) continue;
        for (long long e = 0; e < count[u]; ++e) fold_element<Op, Acc, T>(a, s[u] + e * g.src[4], d[u] + e * g.dst[4]);
      }
    }
  }
}

// The kernel: say ready to every worker and wait until every rank is ready (but those the host
// knows ready: a.ready), reduce this worker's pieces, then (the last CTA) say done to every rank
// and hold the stream until every worker is. A call this rank's host abandoned (a rank died) touches no other rank's memory again.
template <class Op, class Acc, class T, int kRanks, bool kAllInFlight>
__device__ void run(const Launch& a) {
  signals::Pad* own = a.pads[a.self];
  __shared__ bool go;
  if (own) {
    if (threadIdx.x == 0) {
      if (blockIdx.x == 0) {
        __threadfence_system();
        for (int w = 0; w < kRanks; ++w) {
          if (a.workers >> w & 1u && w != a.self) signals::raise_to(&a.pads[w]->ready[a.self], a.epoch);
        }
      }
      go = true;
      for (int r = 0; r < kRanks && go; ++r) {
        if (r != a.self && !(a.ready >> r & 1u)) go = signals::await(&own->ready[r], a.epoch, a.abandoned, a.timeout_ns);
      }
    }
    __syncthreads();
  }
  if (!own || go) run_pieces<Op, Acc, T, kRanks, kAllInFlight>(a);
  if (!own) return;
  __syncthreads();
  if (threadIdx.x == 0 && atomicAdd(a.arrivals, 1u) == gridDim.x - 1) {
    *a.arrivals = 0;  // for the next call, which runs after this kernel on this stream
    if (a.abandoned && signals::observe(a.abandoned) >= a.epoch) return;
    __threadfence_system();  // every CTA's stores to dst are visible first
    for (int r = 0; r < kRanks; ++r) {
      if (r == 0 || a.pads[r] != a.pads[r - 1]) signals::raise_to(&a.pads[r]->done[a.self], a.epoch);
    }
    for (int w = 0; w < kRanks; ++w) {
      if (a.workers >> w & 1u && !signals::await(&own->done[w], a.epoch, a.abandoned, a.timeout_ns)) return;
    }
  }
}

#endif  // TP_ON_DEVICE

}  // namespace treduce
}  // namespace tp
