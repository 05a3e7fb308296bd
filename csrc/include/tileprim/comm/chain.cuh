// TREDUCE's chain (variant `chain`): the partial result travels rank to rank in the fold order
// (the root's value first, then the other ranks ascending) and ends in the root's dst, step by
// step and pipelined, so every link carries about one tensor and the root takes in one; the
// fold is treduce.cuh's, so the bits are root_pull's.
//
// The tensor is cut into steps of whole row segments (row-major order, whatever the tile: the
// fold is elementwise, so how the elements are grouped changes no bit). A step's partial lives
// in a slot, packed: segment j of the step at j * slot_cols, every segment starting on a whole
// vector. On the GPU each rank runs one kernel of `ctas` CTAs on its own stream; CTA b of every
// rank takes steps b, b + ctas, ...: it folds its own source into the partial its predecessor
// pushed into its staging (position 0, the root: its source alone) and pushes the result into
// its successor's staging (the last position: the result, as T, into the root's dst), then
// says so in a flag the successor polls in its own memory; the successor says when it has read
// a slot. Only stores cross the links; every wait polls local memory. Each rank reads no other
// rank's source, so no rank's stream waits for another's: the kernels order themselves.
// The CPU backend runs the same steps, position after position (host_step).
//
// Why push, and how much in flight (the model the constants are tuned to; H200s, NVLink ~370
// GB/s one way): a store to a peer is posted, so a CTA's only round trip over the link is the
// fence before a step's flag (~2 us), where a pull would wait a round trip per load. A CTA's
// step costs about t0 (fence, flag, its first loads: ~3-4 us) plus its bytes at what the CTA's
// loads in flight allow (kThreads x kVectorsPerThread x 16 B per local-memory latency, ~30 GB/s);
// so a link stays busy while ctas x step bytes (a "round", ~2 MiB) cover its bandwidth x t0
// (~1.5 MB), and a CTA's step is one to two rounds of its threads' vectors. The pipeline fills
// in (ranks - 1) hops of a round each: the round is kept no larger than latency needs.
#pragma once
#include "signals.cuh"
#include "treduce.cuh"

namespace tp {
namespace treduce {
namespace chain {

constexpr int kMaxCtas = 32;                // CTAs a rank's kernel runs, at most (a flag pair each)
constexpr int kSlots = 4;                   // steps in flight between two neighbours, per CTA
constexpr long long kSlotBytes = 64 << 10;  // a step's partial, at most
constexpr int kThreads = 512;
constexpr int kMaxSegmentsPerStep = kThreads;  // row segments a step packs (their places are shared memory)
constexpr int kVectorsPerThread = 4;           // 16-byte vectors a thread loads before it folds any
constexpr long long kRoundBytes = 2 << 20;     // ctas x step bytes on a large tensor (see above)

// A rank's flags, in its own GPU's memory (only its own kernel polls them). ready[b]: the last
// step its predecessor's CTA b pushed into its staging (at the root: the last step of dst the
// last rank wrote). consumed[b]: the last step its successor's CTA b has read out of the slots
// it pushed there. Both hold step tags, which only grow (tag()).
struct Flags {
  unsigned long long ready[kMaxCtas];
  unsigned long long consumed[kMaxCtas];
};

TP_HD long long align_up(long long n, long long to) { return (n + to - 1) / to * to; }

// A rank's chain memory follows its signal pad (signals::Pad) in one allocation: the flags,
// then kMaxCtas x kSlots slots of kSlotBytes.
constexpr long long kFlagsAt = (sizeof(signals::Pad) + 4095) / 4096 * 4096;
constexpr long long kStagingAt = kFlagsAt + 4096;
constexpr long long kRankBytes = kStagingAt + kMaxCtas * kSlots * kSlotBytes;

// Step k of CTA b in call `epoch`: a call's tags exceed every earlier call's.
TP_HD unsigned long long tag(unsigned long long epoch, long long k) {
  return (epoch << 32) | static_cast<unsigned long long>(k + 1);
}

// How the tensor is cut: `g`'s pieces are row segments (1 row x up to g.tile_cols elements, in
// row-major order); a step packs pieces_per_step of them, one slot each.
struct Layout {
  Geometry g;
  long long slot_cols;        // a segment's place in a slot: its cols rounded up to whole vectors
  long long pieces_per_step;  // segments a step packs (kMaxSegmentsPerStep at most)
  long long steps;
  int ctas;                   // every rank's kernel alike (ctas <= steps)

  TP_HD long long steps_of(int cta) const { return cta < steps ? (steps - 1 - cta) / ctas + 1 : 0; }
  TP_HD long long first_piece(long long step) const { return step * pieces_per_step; }
  TP_HD long long pieces_in(long long step) const {
    const long long left = g.pieces() - first_piece(step);
    return left < pieces_per_step ? left : pieces_per_step;
  }
};

// One step of the fold at `position` of `ranks`, on the host (the CPU backend), as the kernel
// does it: slot holds the step's partial (the predecessor's, read and overwritten in place).
template <class Op, class Acc, class T>
void host_step(const Layout& l, long long step, int position, int ranks, const T* src, Acc* slot, T* dst) {
  using S = Step<Op, Acc>;
  const Geometry& g = l.g;
  for (long long j = 0; j < l.pieces_in(step); ++j) {
    const Piece p = locate(g, l.first_piece(step) + j);
    for (long long c = 0; c < p.cols; ++c) {
      Acc& partial = slot[j * l.slot_cols + c];
      const T x = src[p.src + c * g.src[4]];
      partial = position == 0 ? S::first(x) : S::next(partial, x);
      if (position == ranks - 1) dst[p.dst + c * g.dst[4]] = S::template last<T>(partial);
    }
  }
}

// The kernel's one parameter (rank `position`'s part), filled by the host.
struct Launch {
  const void* src;    // this rank's source
  void* dst;          // the root's dst: written by the last position only
  Layout l;
  int position, ranks;
  int vectors;        // src and dst 16-byte aligned, cols contiguous in both
  unsigned char* in;  // this rank's staging (its predecessor pushes into it); null at position 0
  unsigned char* out; // the successor's staging; null at the last position
  Flags* own;
  Flags* next;        // the successor's flags; at the last position the root's (null with one rank)
  Flags* prev;        // the predecessor's; null at position 0
  unsigned long long epoch;
  unsigned long long timeout_ns;        // a wait longer than this traps
  const unsigned long long* abandoned;  // host memory: this rank gave up on calls up to this one; or null
};

#if TP_ON_DEVICE

// V values of T or Acc as 16-byte words, so that loads and stores stay whole.
template <class X, int V> union Words {
  static constexpr int kWords = V * static_cast<int>(sizeof(X)) / 16;
  uint4 raw[kWords];
  X value[V];
};

// This rank's source: read once, by this kernel only (never written while it runs: dst, even in
// place, is written by the last position after every position read that step).
__device__ __forceinline__ uint4 load_source(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
// The staging, which the predecessor's GPU writes: read at L2 (where its stores land), never a
// stale L1 line of the slot's last use.
__device__ __forceinline__ uint4 load_staged(const void* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
template <class X> __device__ __forceinline__ X load_staged_value(const X* p) {
  static_assert(sizeof(X) == 2 || sizeof(X) == 4, "an accumulator of 2 or 4 bytes");
  X x;
  if constexpr (sizeof(X) == 4) {
    unsigned v;
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p));
    memcpy(&x, &v, sizeof(x));
  } else {
    unsigned short v;
    asm volatile("ld.global.cg.u16 %0, [%1];" : "=h"(v) : "l"(p));
    memcpy(&x, &v, sizeof(x));
  }
  return x;
}
__device__ __forceinline__ void store_word(void* p, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// One step's segments (pieces[0 .. here)) at slot `slot` of this rank's staging and its
// successor's: thread t takes vectors t, t + blockDim.x, ... (V elements of one segment each),
// kVectorsPerThread of them at a time, every load of a group issued before the group's fold.
// Its loads are local (its source, its staging); its stores go to the successor (or dst).
template <class Op, class Acc, class T>
__device__ void fold_step(const Launch& a, const Piece* pieces, long long here, long long slot) {
  using S = Step<Op, Acc>;
  constexpr int V = 16 / sizeof(T), W = Words<Acc, V>::kWords, kAccPerWord = 16 / sizeof(Acc);
  constexpr int U = kVectorsPerThread;
  const Layout& l = a.l;
  const Geometry& g = l.g;
  const bool last = a.position == a.ranks - 1;
  const Acc* in = a.in ? reinterpret_cast<const Acc*>(a.in + slot * kSlotBytes) : nullptr;
  Acc* out = a.out ? reinterpret_cast<Acc*>(a.out + slot * kSlotBytes) : nullptr;
  const T* src = static_cast<const T*>(a.src);
  T* dst = static_cast<T*>(a.dst);
  const int per_piece = static_cast<int>(l.slot_cols / V), items = static_cast<int>(here) * per_piece;
  // item i: vector c0 / V of segment j, at slot place `at`, V elements (or fewer: `count`)
  const auto locate_item = [&](int i, int& at, long long& s, long long& d) {
    const int j = i / per_piece, c0 = (i - j * per_piece) * V;
    const Piece& p = pieces[j];
    at = j * static_cast<int>(l.slot_cols) + c0;
    s = p.src + c0 * g.src[4];
    d = p.dst + c0 * g.dst[4];
    return p.cols - c0 < V ? static_cast<int>(p.cols - c0) : V;  // <= 0: past the segment's end
  };
  for (int first = threadIdx.x; first < items; first += blockDim.x * U) {
    int at[U];
    long long s[U], d[U];
    unsigned valid = 0;  // bit u: item u lies in its segment
    bool whole = a.vectors;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = first + u * static_cast<int>(blockDim.x);
      if (i >= items) break;
      const int count = locate_item(i, at[u], s[u], d[u]);
      if (count <= 0) continue;  // in its segment's last vector of the slot, past the end
      whole = whole && count == V && s[u] % V == 0 && (!last || d[u] % V == 0);
      valid |= 1u << u;
    }
    if (!whole) {  // a segment's ragged end, or strided or unaligned: item by item, element by element
      for (int u = 0; u < U; ++u) {
        if (!(valid >> u & 1u)) continue;
        const int count = locate_item(first + u * static_cast<int>(blockDim.x), at[u], s[u], d[u]);
        for (int e = 0; e < count; ++e) {
          const T x = src[s[u] + e * g.src[4]];
          const Acc partial = in ? S::next(load_staged_value(in + at[u] + e), x) : S::first(x);
          if (!last) {
            out[at[u] + e] = partial;
          } else {
            dst[d[u] + e * g.dst[4]] = S::template last<T>(partial);
          }
        }
      }
      continue;
    }
    Words<T, V> x[U];
    Words<Acc, V> partial[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {  // every load of the group in flight at once
      if (!(valid >> u & 1u)) continue;
      x[u].raw[0] = load_source(src + s[u]);
      if (in) {
#pragma unroll
        for (int w = 0; w < W; ++w) partial[u].raw[w] = load_staged(in + at[u] + w * kAccPerWord);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (!(valid >> u & 1u)) continue;
#pragma unroll
      for (int e = 0; e < V; ++e)
        partial[u].value[e] = in ? S::next(partial[u].value[e], x[u].value[e]) : S::first(x[u].value[e]);
      if (!last) {
#pragma unroll
        for (int w = 0; w < W; ++w) store_word(out + at[u] + w * kAccPerWord, partial[u].raw[w]);
        continue;
      }
      Words<T, V> result;
#pragma unroll
      for (int e = 0; e < V; ++e) result.value[e] = S::template last<T>(partial[u].value[e]);
      store_word(dst + d[u], result.raw[0]);
    }
  }
}

// CTA b's steps. Before a step: its partial has arrived (ready), and the successor has read
// the slot it is about to overwrite (consumed). After: the successor hears of the new slot,
// the predecessor of the slot read. After the last step: the successor has read every slot
// (so the next call may push into them), and at the root, the last rank has written all of
// dst (so the root's stream goes on with dst complete). A call this rank's host abandoned
// touches no other rank's memory again.
template <class Op, class Acc, class T>
__device__ void run(const Launch& a) {
  const int b = blockIdx.x;
  const Layout& l = a.l;
  const long long n = l.steps_of(b);
  const bool first = a.position == 0, last = a.position == a.ranks - 1;
  __shared__ Piece pieces[kMaxSegmentsPerStep];
  __shared__ bool go;
  for (long long k = 0; k < n; ++k) {
    const long long step = b + k * l.ctas, here = l.pieces_in(step);
    if (threadIdx.x == 0) {
      go = first || signals::await(&a.own->ready[b], tag(a.epoch, k), a.abandoned, a.timeout_ns);
      if (go && !last && k >= kSlots) {
        go = signals::await(&a.own->consumed[b], tag(a.epoch, k - kSlots), a.abandoned, a.timeout_ns);
      }
    }
    if (threadIdx.x < here) pieces[threadIdx.x] = locate(l.g, l.first_piece(step) + threadIdx.x);
    __syncthreads();
    if (!go) return;
    fold_step<Op, Acc, T>(a, pieces, here, b * kSlots + k % kSlots);
    __syncthreads();  // every thread's loads are done and its stores issued
    if (threadIdx.x == 0) {
      __threadfence_system();
      if (a.next) signals::raise_to(&a.next->ready[b], tag(a.epoch, k));
      if (a.prev) signals::raise_to(&a.prev->consumed[b], tag(a.epoch, k));
    }
  }
  if (threadIdx.x != 0 || n == 0) return;
  if (!last && !signals::await(&a.own->consumed[b], tag(a.epoch, n - 1), a.abandoned, a.timeout_ns)) return;
  if (first && !last) signals::await(&a.own->ready[b], tag(a.epoch, n - 1), a.abandoned, a.timeout_ns);
}

#endif  // TP_ON_DEVICE

}  // namespace chain
}  // namespace treduce
}  // namespace tp
