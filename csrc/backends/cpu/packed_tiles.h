// The CPU's fast path for a thread-scope reduction: the tiles' scope instances never talk, so
// kLanes tiles run at once, each in a lane of a Pack, through the same device template (its
// adds, maxima and minima lane by lane: the same bits as one tile at a time, without a fold's
// chain of dependent adds leaving the core idle).
#pragma once
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cpu/pack.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/staging.h"
#include "backends/cpu/transpose.h"
#include "ops/host_types.h"
#include "dispatch/executor.h"
#include "tileprim/reduction/thread_loop.cuh"
#include "variants/reduction/reduction_common.h"

namespace tp {

// A fold view's slots, computed once, in the order the template walks them: the same fold
// without the div/mod chain of MemLayout at every element.
struct SlotTable {
  static constexpr int kUnroll = kUnrollMemory;
  int spatial, reduce;
  std::vector<long long> src, dst;
  explicit SlotTable(const FoldView& v);
  long long dst_slot(int k) const { return dst[k]; }
  long long src_slot(int k, int j) const { return src[static_cast<size_t>(k) * reduce + j]; }
};

// Where each element of a tile is staged (runs of consecutive slots holding consecutive
// elements), and from where each is stored ((slot, element) pairs).
struct SlotMap {
  struct Run {
    long long slot, element, length;
  };
  std::vector<Run> load;
  std::vector<std::pair<long long, long long>> store;
  long long slots = 0;
  bool loads_every_slot = false;  // then staging need not poison first
  explicit SlotMap(const HostStaging& h);
};

// max and min give the same bits in any order: a total order with -0 < +0, and one canonical
// NaN only where every element is NaN (or, propagating, any is). So a whole row may be folded
// as a vector across it, then its lanes, where a sum must go element by element.
template <class Op>
constexpr bool kFoldsInAnyOrder = std::is_same_v<Op, reduce_op::Max> || std::is_same_v<Op, reduce_op::Min> ||
                                  std::is_same_v<Op, reduce_op::MaxNaN> || std::is_same_v<Op, reduce_op::MinNaN>;

template <class T, class Op> class PackedReductionRunner : public Runner {
 public:
  static constexpr int kLanes = 32;  // eight vectors of floats: eight fold chains at once
  using P = Pack<T, kLanes>;

  PackedReductionRunner(const Plan& plan, const FoldView& view)
      : view_(SlotTable(view)),
        accum_(plan.call.accum),
        src_(HostStaging(plan.staging[0])),
        dst_(HostStaging(plan.staged_output())),
        src_elements_(plan.staging[0].elements),
        dst_elements_(plan.staged_output().elements),
        in_place_(src_.loads_every_slot && src_.load.size() == 1 && src_.load[0].slot == 0),
        across_rows_(kFoldsInAnyOrder<Op> && kVectorParts<T> && in_place_ && src_.load[0].length == src_elements_ &&
                     view_.spatial == 1 && view_.reduce == src_elements_ && dst_elements_ == 1 && dst_.slots == 1 &&
                     dst_.store.size() == 1 && src_elements_ >= kAcrossRowsFrom) {}

  // Whether each tile is one long row folded into one output by an any-order op (max, min):
  // then the row is folded across whatever the plan's scope, since any order gives its bits.
  bool folds_rows_across() const { return across_rows_; }

  void run(const RunArgs& args) const override {
    const T* in = reinterpret_cast<const T*>(args.inputs[0].data);
    T* out = reinterpret_cast<T*>(args.output.data);
    const long long groups = (args.tiles + kLanes - 1) / kLanes;
    if (across_rows_) {
      parallel_for(groups, kLanes * src_elements_, args.interrupted, [&](long long begin, long long end, const auto& keep_going) {
        for (long long g = begin; g < end && keep_going(); ++g) {
          for (long long t = g * kLanes; t < std::min((g + 1) * kLanes, args.tiles); ++t) {
            out[t] = fold_across(in + t * src_elements_, src_elements_, accum_ ? out[t] : Op::template identity<T>());
          }
        }
      });
      return;
    }
    parallel_for(groups, kLanes * src_elements_, args.interrupted, [&](long long begin, long long end, const auto& keep_going) {
      std::vector<P> src(static_cast<size_t>(src_.slots)), dst(static_cast<size_t>(dst_.slots));
      for (long long g = begin; g < end && keep_going(); ++g) run_group(in, out, g * kLanes, args.tiles, src, dst);
    });
  }

 private:
  void run_group(const T* in, T* out, long long first, long long tiles, std::vector<P>& src,
                 std::vector<P>& dst) const {
    const int lanes = static_cast<int>(std::min<long long>(kLanes, tiles - first));
    if (accum_) {
      stage(dst, dst_, out, first, lanes, dst_elements_);
    } else {
      std::fill(dst.begin(), dst.end(), limits<P>::quiet_nan());
    }
    if (in_place_) {
      fold(dst.data(), RowSource(in, first, lanes, src_elements_, src_.load[0]), view_, accum_);
    } else {
      stage(src, src_, in, first, lanes, src_elements_);
      fold(dst.data(), src.data(), view_, accum_);
    }
    for (const auto& [slot, e] : dst_.store) {
      for (int l = 0; l < lanes; ++l) out[(first + l) * dst_elements_ + e] = dst[slot].lane(l);
    }
  }

  // The fold alone carries the vector clones; everything it calls is inlined into each.
  template <class Src> TP_HOST_VECTOR_CLONES static void fold(P* dst, Src src, const SlotTable& view, bool accum) {
    thread_reduce<Op>(dst, src, view, accum);
  }

  // A row of an any-order fold. Across the row, four chains of 32-byte vectors keep the greater
  // (lesser) of each pair, which skips NaNs, and note any NaN: 3 instructions per vector (AVX:
  // maxps, a NaN compare, an or) where max_num takes 9; the chains meet as vectors, then 8
  // lanes (this CPU, float32 max of 1024-element rows, one thread: 0.16-0.18 ms per 2^20
  // elements, NumPy 0.14, transposing 32 rows into lanes 0.46). Where that may differ from the
  // fold's bits (a NaN was seen, or the extreme is a zero, whose sign a comparison does not
  // order), the row is folded again by Op.
  static constexpr long long kAcrossRowsFrom = 256;
  TP_HOST_VECTOR_CLONES static T fold_across(const T* row, long long n, T init) {
    if constexpr (kVectorParts<T>) {
      // 32 bytes: one AVX register in the fma clone, two SSE ones in the default (all inside
      // this function, so no vector crosses a call)
      typedef T V __attribute__((vector_size(32)));
      constexpr long long L = 32 / sizeof(T);
      constexpr bool kMax = std::is_same_v<Op, reduce_op::Max> || std::is_same_v<Op, reduce_op::MaxNaN>;
      const T worst = kMax ? limits<T>::neg_inf() : limits<T>::pos_inf();
      V acc[4];
      for (V& a : acc) {
        for (long long l = 0; l < L; ++l) a[l] = worst;
      }
      auto nan = acc[0] != acc[0];
      long long i = 0;
      for (; i + 4 * L <= n; i += 4 * L) {
        for (int c = 0; c < 4; ++c) {
          V x;
          std::memcpy(static_cast<void*>(&x), row + i + c * L, sizeof(V));
          acc[c] = (kMax ? x > acc[c] : x < acc[c]) ? x : acc[c];
          nan |= x != x;
        }
      }
      for (int c = 1; c < 4; ++c) acc[0] = (kMax ? acc[c] > acc[0] : acc[c] < acc[0]) ? acc[c] : acc[0];
      T r = worst;
      bool any_nan = false;
      auto better = [&](T y) { r = (kMax ? y > r : y < r) ? y : r; };
      for (long long l = 0; l < L; ++l) {
        any_nan |= nan[l] != 0;
        better(acc[0][l]);
      }
      for (; i < n; ++i) {
        any_nan |= is_nan(row[i]);
        better(row[i]);
      }
      if (!any_nan && r != T(0)) return Op::apply(init, r);
    }
    using P16 = Pack<T, 64 / sizeof(T)>;  // by Op itself, four chains of 64-byte Packs
    constexpr long long L = 64 / sizeof(T);
    P16 acc[4];
    for (P16& a : acc) a = Op::template identity<P16>();
    long long i = 0;
    for (; i + 4 * L <= n; i += 4 * L) {
      for (int c = 0; c < 4; ++c) {
        P16 x;
        std::memcpy(static_cast<void*>(&x), row + i + c * L, sizeof(P16));
        acc[c] = Op::apply(acc[c], x);
      }
    }
    const P16 all = Op::apply(Op::apply(acc[0], acc[1]), Op::apply(acc[2], acc[3]));
    T r = init;
    for (long long l = 0; l < L; ++l) r = Op::apply(r, all.lane(static_cast<int>(l)));
    for (; i < n; ++i) r = Op::apply(r, row[i]);
    return r;
  }

  static constexpr int W = kTransposeWidth<T>;
  static_assert(kLanes % W == 0, "lanes are whole blocks");

  // Lane l reads tile first + l (the last tile again where the batch runs out).
  static void lane_rows(const T* global, long long first, int lanes, long long elements, const T* rows[kLanes]) {
    for (int l = 0; l < kLanes; ++l) rows[l] = global + (first + std::min(l, lanes - 1)) * elements;
  }

  // W lanes' elements [from, from + W) of a run, as W Packs' lanes l0 ..
  static void move_block(const T* const rows[kLanes], long long from, int l0, P* to) {
    const T* in[W];
    void* out[W];
    for (int k = 0; k < W; ++k) {
      in[k] = rows[l0 + k] + from;
      out[k] = reinterpret_cast<unsigned char*>(&to[k]) + l0 * sizeof(T);
    }
    transpose_block(in, out);
  }

  // The fold's source where the tile is one run from slot 0 (a row-major thread tile): read
  // from the tiles themselves as the fold walks it, a cache line of every lane at a time (rows
  // a page apart share an L1 set: a line read in part would be gone before its next part),
  // instead of the whole run staged first and read back.
  class RowSource {
   public:
    RowSource(const T* global, long long first, int lanes, long long elements, const SlotMap::Run& run)
        : element_(run.element), length_(run.length) {
      lane_rows(global, first, lanes, elements, rows_);
    }
    static constexpr int kBlock = 64 / sizeof(T) > W ? 64 / sizeof(T) : W;  // slots per load
    const P& operator[](long long slot) const {
      if (static_cast<unsigned long long>(slot - base_) >= kBlock) load(slot - slot % kBlock);
      return block_[slot - base_];
    }

   private:
    void load(long long base) const {
      base_ = base;
      const long long whole = std::min<long long>(kBlock, length_ - base) / W * W;
      for (int l0 = 0; l0 < kLanes; l0 += W) {
        for (long long i = 0; i < whole; i += W) move_block(rows_, element_ + base + i, l0, block_ + i);
      }
      for (long long s = base + whole; s < std::min<long long>(base + kBlock, length_); ++s) {
        for (int l = 0; l < kLanes; ++l) block_[s - base].set_lane(l, rows_[l][element_ + s]);
      }
    }
    const T* rows_[kLanes];
    long long element_, length_;
    mutable long long base_ = -2 * kBlock;  // slot of block_[0]; none loaded yet
    mutable P block_[kBlock];
  };

  // Every run of the map, W lanes at a time, each lane's run read in order.
  static void stage(std::vector<P>& buf, const SlotMap& map, const T* global, long long first, int lanes,
                    long long elements) {
    if (!map.loads_every_slot) std::fill(buf.begin(), buf.end(), limits<P>::quiet_nan());
    const T* rows[kLanes];
    lane_rows(global, first, lanes, elements, rows);
    for (const SlotMap::Run& run : map.load) {
      const long long whole = run.length - run.length % W;
      for (int l0 = 0; l0 < kLanes; l0 += W) {
        for (long long i = 0; i < whole; i += W) move_block(rows, run.element + i, l0, &buf[run.slot + i]);
      }
      for (long long i = whole; i < run.length; ++i) {
        for (int l = 0; l < kLanes; ++l) buf[run.slot + i].set_lane(l, rows[l][run.element + i]);
      }
    }
  }

  SlotTable view_;
  bool accum_;
  SlotMap src_, dst_;
  long long src_elements_, dst_elements_;
  bool in_place_;  // the source is one run from slot 0: the fold reads it through a RowSource
  bool across_rows_;  // a long row folded into one output by an any-order op: fold_across each
};

}  // namespace tp
