// The CPU's fast path for a thread-scope reduction: the tiles' scope instances never talk, so
// kLanes tiles run at once, each in a lane of a Pack, through the same device template (its
// adds, maxima and minima lane by lane: the same bits as one tile at a time, without a fold's
// chain of dependent adds leaving the core idle).
#pragma once
#include <memory>
#include <utility>
#include <vector>

#include "backends/cpu/pack.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/staging.h"
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

// (slot, element) pairs: where each element of a tile is staged, and from where it is stored.
struct SlotMap {
  std::vector<std::pair<long long, long long>> load, store;
  long long slots = 0;
  explicit SlotMap(const HostStaging& h);
};

template <class T, class Op> class PackedReductionRunner : public Runner {
 public:
  static constexpr int kLanes = 8;
  using P = Pack<T, kLanes>;

  PackedReductionRunner(const Plan& plan, const FoldView& view)
      : view_(SlotTable(view)),
        accum_(plan.call.accum),
        src_(HostStaging(plan.staging[0])),
        dst_(HostStaging(plan.staged_output())),
        src_elements_(plan.staging[0].elements),
        dst_elements_(plan.staged_output().elements) {}

  void run(const RunArgs& args) const override {
    const T* in = reinterpret_cast<const T*>(args.inputs[0].data);
    T* out = reinterpret_cast<T*>(args.output.data);
    const long long groups = (args.tiles + kLanes - 1) / kLanes;
    parallel_for(groups, kLanes * src_elements_, args.interrupted, [&](long long begin, long long end, const auto& go) {
      std::vector<P> src(static_cast<size_t>(src_.slots)), dst(static_cast<size_t>(dst_.slots));
      for (long long g = begin; g < end && go(); ++g) run_group(in, out, g * kLanes, args.tiles, src, dst);
    });
  }

 private:
  void run_group(const T* in, T* out, long long first, long long tiles, std::vector<P>& src,
                 std::vector<P>& dst) const {
    const int lanes = static_cast<int>(std::min<long long>(kLanes, tiles - first));
    stage(src, src_, in, first, lanes, src_elements_);
    if (accum_) {
      stage(dst, dst_, out, first, lanes, dst_elements_);
    } else {
      std::fill(dst.begin(), dst.end(), limits<P>::quiet_nan());
    }
    fold(dst.data(), src.data(), view_, accum_);
    for (const auto& [slot, e] : dst_.store) {
      for (int l = 0; l < lanes; ++l) out[(first + l) * dst_elements_ + e] = dst[slot].v[l];
    }
  }

  // The fold alone carries the vector clones: nothing of another target is inlined into one.
  TP_HOST_VECTOR_CLONES static void fold(P* dst, const P* src, const SlotTable& view, bool accum) {
    thread_reduce<Op>(dst, src, view, accum);
  }

  // Lane l holds tile first + l (the last tile again where the batch runs out).
  static void stage(std::vector<P>& buf, const SlotMap& map, const T* global, long long first, int lanes,
                    long long elements) {
    std::fill(buf.begin(), buf.end(), limits<P>::quiet_nan());
    for (const auto& [slot, e] : map.load) {
      for (int l = 0; l < kLanes; ++l) buf[slot].v[l] = global[(first + std::min(l, lanes - 1)) * elements + e];
    }
  }

  SlotTable view_;
  bool accum_;
  SlotMap src_, dst_;
  long long src_elements_, dst_elements_;
};

}  // namespace tp
