// Tile programs on the GPU: a program's tiles moved between global memory, shared memory and the
// threads' registers. The generated kernel holds each register tile as an array and each shared
// tile as a pointer into its instance's shared memory, and calls these around each step's device
// template (the same template the CPU backend runs). Data movement only: values move unchanged.
#pragma once
#include "config.cuh"
#include "layout.cuh"
#include "numeric.cuh"
#include "staging.cuh"

namespace tp {

#if TP_ON_DEVICE
// A register tile's placement in closed form (the planner's spread layouts): lane l holds in
// slot s element ((s / kVec) * kOwners + l % kOwners) * kVec + s % kVec; lanes past kOwners
// hold replicas, and the first kOwners lanes write the tile back. A padded tile (kElements > 0,
// a ragged row spread over every lane) holds nothing where that element is kElements or more:
// full(s) says every lane's slot s holds one, a constant for each unrolled slot but the tail's.
template <int kOwners, int kVec, int kElements = 0> struct RunPlace {
  static __device__ __forceinline__ constexpr bool full(int s) {
    return kElements == 0 || (s / kVec + 1) * kOwners * kVec <= kElements;
  }
  static __device__ __forceinline__ int load_element(int lane, int s) {
    const int e = ((s / kVec) * kOwners + lane % kOwners) * kVec + s % kVec;
    return full(s) || e < kElements ? e : -1;
  }
  static __device__ __forceinline__ int store_element(int lane, int s) {
    return lane < kOwners ? load_element(lane, s) : -1;
  }
  // f(element) where this lane writes slot s back (the element a function of the slot alone,
  // not a select that a store would have to resolve)
  template <class F> static __device__ __forceinline__ void stored(int lane, int s, F f) {
    const int e = store_element(lane, s);
    if (e >= 0) f(e);
  }
  static constexpr int kVector = kVec;
};

// A placement's table, one direction: kTable[slot * kLanes + lane] is the element a lane's slot
// holds (loads) or writes back (stores), -1 for none; with kLanes 1 every lane reads the same entry
// (one thread, or a tile every thread holds whole).
template <int kLanes, const int* kTable> struct SlotTable {
  static __device__ __forceinline__ int element(int lane, int s) { return kTable[kLanes == 1 ? s : s * kLanes + lane]; }
  // f(element) where the entry names one: read and tested in one place, so that the compiler
  // folds the test into one on the index (a replicated result: lane 0 alone) and the element
  // with it
  template <class F> static __device__ __forceinline__ void held(int lane, int s, F f) {
    const int e = kTable[kLanes == 1 ? s : s * kLanes + lane];
    if (e >= 0) f(e);
  }
};

// The direction an operand does not move: no slot holds an element.
struct NoSlots {
  static __device__ __forceinline__ int element(int, int) { return -1; }
  template <class F> static __device__ __forceinline__ void held(int, int, F) {}
};

// Any other placement: the planner's tables (SlotTable), the store table listing each element at
// the one position that writes it back.
template <class Load, class Store> struct TablePlace {
  static __device__ __forceinline__ int load_element(int lane, int s) { return Load::element(lane, s); }
  template <class F> static __device__ __forceinline__ void stored(int lane, int s, F f) { Store::held(lane, s, f); }
  static constexpr int kVector = 1;
};

// Slots [first, first + N) of this lane from `source(element)`. A slot holding no element (a padded
// tile's tail) repeats element 0, so that the maps over it take the path real elements take: a NaN
// or an infinity there sends a whole bundle of exp to its general form (the rows of 1000 and 4097
// ran 2.5x slower so). Nothing stores those slots, and a fold reads them as its identity.
template <class Place, class T, int N, class Source>
__device__ __forceinline__ void gather(T (&regs)[N], int lane, Source source, int first = 0) {
#pragma unroll
  for (int s = 0; s < N; ++s) {
    const int e = Place::load_element(lane, first + s);
    regs[s] = source(e >= 0 ? e : 0);
  }
}

// Every element slots [first, first + N) of this lane write back, to `sink(element, value)`.
template <class Place, class T, int N, class Sink>
__device__ __forceinline__ void scatter(const T (&regs)[N], int lane, Sink sink, int first = 0) {
#pragma unroll
  for (int s = 0; s < N; ++s) Place::stored(lane, first + s, [&](int e) { sink(e, regs[s]); });
}

// The widest access (16, 8 or 4 bytes) that a run of kVector elements is made of.
template <class T, int kVector> struct RunWord {
  static constexpr int kRunBytes = kVector * static_cast<int>(sizeof(T));
  static constexpr int kBytes = kRunBytes % 16 == 0 ? 16 : kRunBytes % 8 == 0 ? 8 : kRunBytes % 4 == 0 ? 4 : 0;
  static constexpr int kElements = kBytes / static_cast<int>(sizeof(T));
};
template <int kBytes> struct WordOf;
template <> struct WordOf<16> { using type = uint4; };
template <> struct WordOf<8> { using type = uint2; };
template <> struct WordOf<4> { using type = unsigned; };

// How load_tile and store_tile move whole words: global memory through the read-only path;
// global memory touched for the last time (a program's last pass over rows that earlier passes
// read: evict first, so that the rows still to be re-read stay in L2); shared memory.
struct GlobalAccess {
  template <class W> static __device__ __forceinline__ W load(const W* p) { return __ldg(p); }
  template <class W> static __device__ __forceinline__ void store(W* p, const W& w) { *p = w; }
};
struct LastAccess {
  template <class W> static __device__ __forceinline__ W load(const W* p) { return __ldcs(p); }
  template <class W> static __device__ __forceinline__ void store(W* p, const W& w) { __stcs(p, w); }
};
struct SharedAccess {
  template <class W> static __device__ __forceinline__ W load(const W* p) { return *p; }
  template <class W> static __device__ __forceinline__ void store(W* p, const W& w) { *p = w; }
};

// A register tile from or to a row-major tile in memory (slots [first, first + N) of it): a
// lane's runs move in 16-, 8- or 4-byte accesses where the tile is aligned for them (a warp's
// accesses then cover one contiguous span for the planner's interleaved runs), element by element
// otherwise and in a padded tile's last runs (RunPlace::full). 16-bit elements at an unaligned
// address load their runs' words element by element (load_unaligned), so that both ways meet as
// words and every element is taken out of its word once: met as elements, each would first move
// into a register of its own.
template <class Place, class Access = GlobalAccess, class T, int N>
__device__ __forceinline__ void load_tile(T (&regs)[N], const T* tile, int lane, int first = 0) {
  using R = RunWord<T, Place::kVector>;
  if constexpr (Place::kVector > 1 && N % Place::kVector == 0 && R::kBytes > 0 && R::kElements > 1) {
    using W = typename WordOf<R::kBytes>::type;
    constexpr int kWords = N / R::kElements;
    W words[kWords];  // the whole runs' words
    const auto load_whole_runs = [&](auto load) {
#pragma unroll
      for (int w = 0; w < kWords; ++w) {
        const int s = first + w * R::kElements;
        if (Place::full(s)) words[w] = load(tile + Place::load_element(lane, s));
      }
    };
    const auto word_load = [](const T* run) { return Access::load(reinterpret_cast<const W*>(run)); };
    const bool aligned = reinterpret_cast<unsigned long long>(tile) % R::kBytes == 0;
    if constexpr (sizeof(T) < 4) {
      if (aligned) {
        load_whole_runs(word_load);
      } else {
        load_whole_runs([](const T* run) { return load_unaligned<W>(run); });
      }
    } else {
      if (!aligned) return gather<Place>(regs, lane, [&](int e) { return tile[e]; }, first);
      load_whole_runs(word_load);
    }
#pragma unroll
    for (int w = 0; w < kWords; ++w) {
      const int s = w * R::kElements;
      if (!Place::full(first + s)) {
#pragma unroll
        for (int j = 0; j < R::kElements; ++j) {
          const int e = Place::load_element(lane, first + s + j);
          regs[s + j] = tile[e >= 0 ? e : 0];  // a padded slot repeats element 0, as gather's
        }
        continue;
      }
      union {
        W word;
        T values[R::kElements];
      } u;
      u.word = words[w];
#pragma unroll
      for (int j = 0; j < R::kElements; ++j) regs[s + j] = u.values[j];
    }
  } else {
    gather<Place>(regs, lane, [&](int e) { return tile[e]; }, first);
  }
}

template <class Place, class Access = GlobalAccess, class T, int N>
__device__ __forceinline__ void store_tile(T* tile, const T (&regs)[N], int lane, int first = 0) {
  using R = RunWord<T, Place::kVector>;
  if constexpr (Place::kVector > 1 && N % Place::kVector == 0 && R::kBytes > 0 && R::kElements > 1) {
    using W = typename WordOf<R::kBytes>::type;
    if (reinterpret_cast<unsigned long long>(tile) % R::kBytes == 0) {
#pragma unroll
      for (int s = 0; s < N; s += R::kElements) {
        if (!Place::full(first + s)) {
#pragma unroll
          for (int j = 0; j < R::kElements; ++j) {
            Place::stored(lane, first + s + j, [&](int e) { tile[e] = regs[s + j]; });
          }
          continue;
        }
        const int e = Place::store_element(lane, first + s);
        if (e < 0) continue;
        union {
          W word;
          T values[R::kElements];
        } u;
#pragma unroll
        for (int j = 0; j < R::kElements; ++j) u.values[j] = regs[s + j];
        Access::store(reinterpret_cast<W*>(tile + e), u.word);
      }
      return;
    }
  }
  scatter<Place>(regs, lane, [&](int e, T v) { tile[e] = v; }, first);
}

// A tile's copy in shared memory that this lane alone reads back (read_slots): its N slots copied
// from global memory to where Share places them (the same runs over the CTA's threads, `tid`),
// without passing through registers: each run one cp.async (sm_80 and later) where the tile is
// aligned for it, in flight until wait_async. A run across a padded tile's end moves element by
// element; slots past the end move nothing.
template <class Place, class Share, int N, class T>
__device__ __forceinline__ void copy_slots_async(T* share, const T* tile, int lane, int tid) {
  constexpr int kVec = Place::kVector, kRunBytes = kVec * static_cast<int>(sizeof(T));
  constexpr bool kRuns = kRunBytes == 4 || kRunBytes == 8 || kRunBytes == 16;
  const bool aligned = kRuns && reinterpret_cast<unsigned long long>(tile) % kRunBytes == 0;
#pragma unroll
  for (int s = 0; s < N; s += kVec) {
    T* const to = share + Share::load_element(tid, s);
    bool whole = aligned;
#pragma unroll
    for (int j = 0; j < kVec; ++j) whole = whole && (Place::full(s) || Place::load_element(lane, s + j) >= 0);
    if constexpr (kRuns) {
      if (whole) {
        copy_run_async<kRunBytes>(to, tile + Place::load_element(lane, s));
        continue;
      }
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const int e = Place::load_element(lane, s + j);
      if (e >= 0) to[j] = tile[e];
    }
  }
}

// This lane's slots from its copy_slots_async (waited for), as load_tile reads them from global
// memory but for a padded tile's slots past its end: those repeat the lane's first element (no
// other lane's, which no barrier orders), the value of no consequence as load_tile's element 0.
template <class Place, class Share, class T, int N>
__device__ __forceinline__ void read_slots(T (&regs)[N], const T* share, int lane, int tid) {
  load_tile<Share, SharedAccess>(regs, share, tid);
#pragma unroll
  for (int s = 0; s < N; ++s) {
    if (!Place::full(s) && Place::load_element(lane, s) < 0) regs[s] = regs[0];
  }
}

// A reduction's source: the slots [first, first + N) of this lane that hold no element (a padded
// tile's tail) set to the fold's identity, so that folding them changes nothing (x + -0 == x;
// fmax(x, NaN) == x; the NaN-propagating forms' infinities).
template <class Op, class Place, class T, int N>
__device__ __forceinline__ void pad_identity(T (&regs)[N], int lane, int first = 0) {
#pragma unroll
  for (int s = 0; s < N; ++s) {
    if (Place::load_element(lane, first + s) < 0) regs[s] = Op::template identity<T>();
  }
}
// The same into a copy, for a source that later steps read: their maps would meet the identity's
// infinities (the copy costs no registers but the padded slots': the rest are the same values).
template <class Op, class Place, class T, int N>
__device__ __forceinline__ void padded_copy(T (&to)[N], const T (&from)[N], int lane) {
#pragma unroll
  for (int s = 0; s < N; ++s) to[s] = from[s];
  pad_identity<Op, Place>(to, lane);
}

// A shared tile from or to a row-major tile in global memory, the instance's threads taking
// every kThreads-th element.
template <int kThreads, class T>
__device__ __forceinline__ void load_shared_tile(T* smem, const MemLayout& L, const T* tile, long long n, int lane) {
  for (long long e = lane; e < n; e += kThreads) smem[memory_offset(L, e)] = tile[e];
}
template <int kThreads, class T>
__device__ __forceinline__ void store_shared_tile(T* tile, const T* smem, const MemLayout& L, long long n, int lane) {
  for (long long e = lane; e < n; e += kThreads) tile[e] = smem[memory_offset(L, e)];
}

// A register tile copied slot by slot (a value a program returns twice, or an input it returns).
template <class T, int N> __device__ __forceinline__ void copy_slots(T (&to)[N], const T (&from)[N]) {
#pragma unroll
  for (int s = 0; s < N; ++s) to[s] = from[s];
}

// n elements of a shared tile copied as they lie, the instance's threads taking every kThreads-th.
template <int kThreads, class T>
__device__ __forceinline__ void copy_shared(T* to, const T* from, long long n, int lane) {
  for (long long e = lane; e < n; e += kThreads) to[e] = from[e];
}

// A copy into a shared tile: element e of the result reads the source at source(e).
template <int kThreads, class T, class Source>
__device__ __forceinline__ void fill_shared(T* smem, const MemLayout& L, long long n, int lane, Source source) {
  for (long long e = lane; e < n; e += kThreads) smem[memory_offset(L, e)] = source(e);
}
#endif

}  // namespace tp
