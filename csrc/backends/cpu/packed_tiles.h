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
#include "dispatch/executor.h"
#include "tileprim/reduction/thread_loop.cuh"
#include "variants/reduction/reduction_common.h"

namespace tp {

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
      : view_(view),
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
      for (long long g = begin; g < end && go(); ++g) {
        const long long first = g * kLanes;
        const int lanes = static_cast<int>(std::min<long long>(kLanes, args.tiles - first));
        stage(src, src_, in, first, lanes, src_elements_);
        if (accum_) {
          stage(dst, dst_, out, first, lanes, dst_elements_);
        } else {
          std::fill(dst.begin(), dst.end(), limits<P>::quiet_nan());
        }
        thread_reduce<Op>(dst.data(), src.data(), view_, accum_);
        for (const auto& [slot, e] : dst_.store) {
          for (int l = 0; l < lanes; ++l) out[(first + l) * dst_elements_ + e] = dst[slot].v[l];
        }
      }
    });
  }

 private:
  // Lane l holds tile first + l (the last tile again where the batch runs out).
  static void stage(std::vector<P>& buf, const SlotMap& map, const T* global, long long first, int lanes,
                    long long elements) {
    std::fill(buf.begin(), buf.end(), limits<P>::quiet_nan());
    for (const auto& [slot, e] : map.load) {
      for (int l = 0; l < kLanes; ++l) buf[slot].v[l] = global[(first + std::min(l, lanes - 1)) * elements + e];
    }
  }

  FoldView view_;
  bool accum_;
  SlotMap src_, dst_;
  long long src_elements_, dst_elements_;
};

}  // namespace tp
