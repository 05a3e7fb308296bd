// The kernel frame on the device: a block's run of tiles, taken by its scope instances in rounds,
// and the moves of its operands between global memory, the block's shared staging and the
// instances' registers that the host's launch shape (backends/cuda/launch_shape.h) chooses. The
// generated kernel declares its operands and calls these around the body; every loop over parts,
// rounds, chunks and slots is here.
#pragma once
#include "config.cuh"
#include "numeric.cuh"
#include "program.cuh"
#include "staging.cuh"

namespace tp {

#if TP_ON_DEVICE
// f(i) for i in [begin, end): unrolled where kUnroll (the rounds index registers loaded for all
// of them up front), else as the compiler sees fit.
template <bool kUnroll, class F> __device__ __forceinline__ void repeat(int begin, int end, F f) {
  if constexpr (kUnroll) {
#pragma unroll
    for (int i = begin; i < end; ++i) f(i);
  } else {
    for (int i = begin; i < end; ++i) f(i);
  }
}

// A folded output (launch_shape.h FrameSpec::folded_tiles): its sum over the block's tiles, element by
// element in shared memory in W (float; double for double tiles), each element added by the thread that
// stores it, in the tiles' order. Begun at -0.0, the identity of a sum (-0.0 + -0.0 stays -0.0), as the
// CPU backend's fold; written once the block's tiles are done.
template <class W> __device__ __forceinline__ void begin_fold(W* sum, long long elements) {
  for (long long e = threadIdx.x; e < elements; e += blockDim.x) sum[e] = limits<W>::neg_zero();
  __syncthreads();
}
// The elements this lane's slots [first, first + N) write back (by its placement), each added to its sum.
template <class Place, class W, class T, int N>
__device__ __forceinline__ void fold_tile_into(W* sum, const T (&regs)[N], int lane, int first = 0) {
  scatter<Place>(regs, lane, [&](int e, T v) { sum[e] = add(sum[e], cast<W>(v)); }, first);
}
// This lane's run of N elements, the sums of the same run.
template <class W, class T, int N> __device__ __forceinline__ void fold_run_into(W* sum, const T (&regs)[N]) {
#pragma unroll
  for (int s = 0; s < N; ++s) sum[s] = add(sum[s], cast<W>(regs[s]));
}
template <class W> __device__ __forceinline__ void end_fold(W* global, const W* sum, long long elements) {
  __syncthreads();
  for (long long e = threadIdx.x; e < elements; e += blockDim.x) global[e] = sum[e];
}

// f(chunk) for each of a thread's kChunks chunks of slots (a map's, or a row's in passes), in
// turn: each chunk's registers unrolled, the chunks not.
template <int kChunks, class F> __device__ __forceinline__ void for_each_chunk(F f) {
#pragma unroll 1
  for (int chunk = 0; chunk < kChunks; ++chunk) f(chunk);
}

// A cluster CTA's share of a row: this thread's slots of the row (placed by Row over the cluster's
// lanes, `lane`) copied from global memory into the CTA's shared memory, where they lie by Share
// (the same runs over the CTA's threads, `tid`). Each run is one cp.async where the row is aligned
// for it (every run of the share in flight at once, none held in registers), else the runs move
// through registers kChunkSlots at a time. Each thread later reads back only the slots it wrote
// (after its own wait), so no barrier stands between; slots past a padded row hold NaN, as a load
// from global memory gives them.
template <class Row, class Share, int kChunks, int kChunkSlots, class T>
__device__ __forceinline__ void stage_share(T* share, const T* row, int lane, int tid) {
  constexpr int kVec = Row::kVector, kRunBytes = kVec * static_cast<int>(sizeof(T));
#if __CUDA_ARCH__ >= 800
  if constexpr (kRunBytes == 4 || kRunBytes == 8 || kRunBytes == 16) {
    if (reinterpret_cast<unsigned long long>(row) % kRunBytes == 0) {
#pragma unroll 4
      for (int s = 0; s < kChunks * kChunkSlots; s += kVec) {
        T* const to = share + Share::load_element(tid, s);
        if (Row::full(s)) {
          copy_run_async<kRunBytes>(to, row + Row::load_element(lane, s));
        } else {  // a padded row's last runs
          for (int j = 0; j < kVec; ++j) {
            const int e = Row::load_element(lane, s + j);
            to[j] = e >= 0 ? row[e] : limits<T>::quiet_nan();
          }
        }
      }
      commit_async();
      wait_async(0);
      return;
    }
  }
#endif
  for_each_chunk<kChunks>([&](const int chunk) {
    T regs[kChunkSlots];
    load_tile<Row>(regs, row, lane, chunk * kChunkSlots);
    store_tile<Share, SharedAccess>(share, regs, tid, chunk * kChunkSlots);
  });
}

// How the block's staged run reaches shared memory before the rounds of each part: nothing is
// staged; copied (one barrier); copied asynchronously (each part waited for, then a barrier).
enum class Arrival { none, copied, async };

// A block's run of tiles: kInstances scope instances of kThreads threads, each taking kRounds
// tiles in turn (round r of instance i of block b: tile b * kInstances * kRounds + r * kInstances
// + i), the run staged in kStages parts. With kCtas > 1 the instance is a thread-block cluster of
// kCtas blocks (one instance, kThreads / kCtas threads each): its blocks take the run together, a
// thread's lane being its block's rank in the cluster * kThreads / kCtas + its index.
template <int kThreads, int kInstances, int kRounds, int kStages, int kCtas = 1> struct BlockRun {
  static constexpr int kTiles = kInstances * kRounds;
  static constexpr int kPart = kRounds / kStages * kInstances;  // tiles of one part

  long long tiles;  // of the batch
  int instance;     // this thread's scope instance in the block
  int lane;         // this thread's index in its instance
  long long first;  // the block's first tile
  int valid;        // tiles of the run in the batch

  // `valid` from blockIdx again, not from the member `first`: ptxas then allocates as for the
  // expressions written out in the kernel (a warp's rows of 1024: 58 registers, not 64)
  // (a 1-D grid of clusters of kCtas blocks: the rank in the cluster is blockIdx.x % kCtas)
  __device__ __forceinline__ explicit BlockRun(long long tiles_)
      : tiles(tiles_), instance(threadIdx.x / kThreads),
        lane(kCtas == 1 ? threadIdx.x % kThreads : blockIdx.x % kCtas * (kThreads / kCtas) + threadIdx.x),
        first(static_cast<long long>(blockIdx.x / kCtas) * kTiles),
        valid(static_cast<int>(tiles_ - static_cast<long long>(blockIdx.x / kCtas) * kTiles < kTiles
                                   ? tiles_ - static_cast<long long>(blockIdx.x / kCtas) * kTiles
                                   : kTiles)) {}
  // The run of block `block` of a grid whose blocks each take several runs in turn (a folded output's,
  // one CTA a block: launch_shape.h FrameSpec::folded_tiles).
  __device__ __forceinline__ BlockRun(long long tiles_, long long block)
      : tiles(tiles_), instance(threadIdx.x / kThreads), lane(threadIdx.x % kThreads), first(block * kTiles),
        valid(static_cast<int>(tiles_ - block * kTiles < kTiles ? tiles_ - block * kTiles : kTiles)) {
    static_assert(kCtas == 1, "a cluster's run is its blocks'");
  }

  // Starts the run's copies part by part, each part one commit group: copy(from, count) issues
  // tiles [from, from + count) of it.
  template <class Copy> __device__ __forceinline__ void stage_async(Copy copy) const {
    for (int stage = 0; stage < kStages; ++stage) {
      const int from = stage * kPart;
      const int count = valid - from < 0 ? 0 : (valid - from < kPart ? valid - from : kPart);
      copy(from, count);
      commit_async();
    }
  }

  // Every round's run of N registers of this lane, straight from global memory (tiles of
  // kElements, a lane's run at lane * N), all issued before the rounds so that they are in flight
  // at once.
  template <long long kElements, class T, int N>
  __device__ __forceinline__ void load_rounds(T (&regs)[kRounds][N], const T* global) const {
#pragma unroll
    for (int round = 0; round < kRounds; ++round) {
      const long long tile = first + round * kInstances + instance;
      if (tile < tiles) load_run(regs[round], global + tile * kElements + lane * N);
    }
  }

  // A tile an instance alone in its block takes in turn with its next (LaunchShape's prefetched
  // operands): round 0's from global memory, every later round's from the copy in shared memory
  // (`share`, this CTA's threads' runs) that the round before started; prefetch_next then starts
  // the next round's, once every operand's registers are read.
  template <class Place, long long kElements, class T, int N>
  __device__ __forceinline__ void take_prefetched(T (&regs)[N], const T* share, const T* global, long long tile,
                                                  int round) const {
    if (round == 0) {
      load_tile<Place>(regs, global + tile * kElements, lane);
    } else {
      wait_async(0);
      read_slots<Place, RunPlace<kThreads / kCtas, Place::kVector>>(regs, share, lane, lane % (kThreads / kCtas));
    }
  }
  template <class Place, long long kElements, int N, class T>
  __device__ __forceinline__ void prefetch_next(T* share, const T* global, long long tile, int round) const {
    if (round + 1 < kRounds && tile + kInstances < tiles) {
      copy_slots_async<Place, RunPlace<kThreads / kCtas, Place::kVector>, N>(share, global + (tile + kInstances) * kElements,
                                                                              lane, lane % (kThreads / kCtas));
    }
  }

  // body(round, slot, tile, live) for this instance's tile of each round, part by part once the
  // part has arrived (kArrival). A whole instance is in or out together; with kClamped, an
  // instance past the batch's end runs the last tile again with `live` false (its stores
  // skipped), so that every instance of the block passes the same barriers.
  template <Arrival kArrival, bool kUnroll, bool kClamped, class Body>
  __device__ __forceinline__ void rounds(Body body) const {
    repeat<kUnroll>(0, kStages, [&](int stage) {
      if constexpr (kArrival == Arrival::async) wait_async(kStages - 1 - stage);
      if constexpr (kArrival != Arrival::none) __syncthreads();
      repeat<kUnroll>(stage * (kRounds / kStages), (stage + 1) * (kRounds / kStages), [&](int round) {
        const int slot = round * kInstances + instance;  // this instance's tile within the run
        if constexpr (kClamped) {
          const bool live = first + slot < tiles;
          body(round, slot, live ? first + slot : tiles - 1, live);
        } else {
          const long long tile = first + slot;
          if (tile < tiles) body(round, slot, tile, true);
        }
      });
    });
  }

  // body(run view) over this lane's run of `elements` at `run`, read as the body folds it:
  // streamed through its warp's window of kWindowStages chunks (WindowRun; `windows`: the block's,
  // whole warps each) where every lane of the warp holds a tile of the batch and an aligned
  // run, else in place (GlobalRun).
  template <int kWindowStages, class T, class Body>
  __device__ __forceinline__ void stream_run(long long tile, unsigned char* windows, const T* run, long long elements,
                                             Body body) const {
    // lane 31's tile is in too (thread scope: a warp's lanes hold consecutive tiles)
    if (tile + (31 - threadIdx.x % 32) / kThreads < tiles && __all_sync(~0u, aligned16(run))) {
      const WindowRun<T, kWindowStages> view{reinterpret_cast<char*>(windows) +
                                                 threadIdx.x / 32 * (kWindowStages * kWindowSlotBytes),
                                       run, elements, static_cast<int>(threadIdx.x % 32)};
      body(view);
    } else {
      read_in_place(body, run);
    }
  }
};

// One operand's tiles of the block's run in shared memory, kElements each: skewed where threads
// gather and scatter their registers from it (kSkew), as they are where the body reads the
// tiles in place.
template <class T, int kElements, bool kSkew> struct BlockTiles {
  T* area;

  __device__ __forceinline__ T* at(int slot) const { return area + static_cast<long long>(slot) * kElements; }

  template <class Block> __device__ __forceinline__ void copy_in(const Block& b, const T* global) const {
    copy_to_shared<kSkew>(area, global + b.first * kElements, b.valid * kElements, threadIdx.x, blockDim.x);
  }
  // Tiles [from, from + count) of the run, without waiting (cp.async): see BlockRun::stage_async.
  template <class Block>
  __device__ __forceinline__ void copy_part_async(const Block& b, const T* global, int from, int count) const {
    copy_to_shared_async(area + from * kElements, global + (b.first + from) * kElements, count * kElements, threadIdx.x,
                         blockDim.x);
  }
  // Once every instance has written its tiles.
  template <class Block> __device__ __forceinline__ void copy_out(const Block& b, T* global) const {
    __syncthreads();
    copy_from_shared<kSkew>(global + b.first * kElements, area, b.valid * kElements, threadIdx.x, blockDim.x);
  }

  // This lane's slots [first, first + N) of the run's tile `slot`, by its placement (a slot
  // holding no element gets NaN), and back.
  template <class Place, int N> __device__ __forceinline__ void gather(T (&regs)[N], int slot, int lane, int first = 0) const {
    tp::gather<Place>(regs, lane, [&](int e) { return area[skewed(slot * kElements + e)]; }, first);
  }
  template <class Place, int N>
  __device__ __forceinline__ void scatter(const T (&regs)[N], int slot, int lane, int first = 0) const {
    tp::scatter<Place>(regs, lane, [&](int e, T x) { area[skewed(slot * kElements + e)] = x; }, first);
  }
};
#endif

}  // namespace tp
