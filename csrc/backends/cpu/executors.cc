// The CPU executors of the tile variants: each is the variant's body, the same device
// template the CUDA kernel calls, run on one scope instance with HostLanes; the tile frame
// (tile_frame.cc) does the rest.
#include "backends/cpu/executors.h"

#include <algorithm>

#include "backends/cpu/copy_executor.h"
#include "backends/cpu/gather_executor.h"
#include "backends/cpu/host_lanes.h"
#include "backends/cpu/packed_tiles.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/table_view.h"
#include "backends/cpu/tile_frame.h"
#include "backends/cpu/treduce_executor.h"
#include "ops/host_types.h"
#include "ops/reduce_functors.h"
#include "tileprim/reduction/lane_reduce.cuh"
#include "tileprim/reduction/shared_groups.cuh"
#include "tileprim/reduction/sm100_packed.cuh"
#include "tileprim/reduction/thread_loop.cuh"
#include "variants/reduction/reduction_common.h"

namespace tp {

namespace {

// Calls f(T, Op) with the plan's element type and reduction operator.
template <class F> HostBody reduction_body(const Plan& plan, F&& f) {
  HostBody body;
  with_host_float(plan.call.inputs[0].dtype, [&](auto tag) {
    with_reduce_functor(reduce_functor(plan.call), [&](auto op) { body = f(tag, op); });
  });
  return body;
}

// The staged source's [thread * slots + slot] that hold no element of a padded register tile:
// the fold reads them as its identity (tp::pad_identity on the GPU).
std::vector<long long> padded_slots(const Plan& plan) {
  std::vector<long long> out;
  const TileRef& src = plan.call.inputs[0];
  if (src.storage != Storage::local || !src.layout || !src.layout->padded()) return out;
  for (const OperandStaging& s : plan.staging) {
    if (s.operand != 0 || s.kind != Staging::registers) continue;
    const RegisterPlacement& p = *s.place;
    for (int t = 0; t < p.threads; ++t) {
      for (int k = 0; k < p.slots; ++k) {
        if (p.element_at(t, k) < 0) out.push_back(static_cast<long long>(t) * p.slots + k);
      }
    }
  }
  return out;
}

// local and shared on one scope instance: a thread-wise plan folds each thread's own registers;
// the others fold across lanes by the variant's own algorithm, `lane_fold`.
// The lanes fold through the view's slot tables (table_view.h): the same slots, no division.
template <class Detail, class LaneFold> HostBody lane_body(const Plan& plan, LaneFold lane_fold) {
  const Detail d = plan.detail_as<Detail>();
  const bool accum = plan.call.accum;
  const HostLanes lanes{plan.call.scope.threads};
  auto slots = std::make_shared<const SlotTables>(d.view);
  auto padded = std::make_shared<const std::vector<long long>>(padded_slots(plan));
  return reduction_body(plan, [&](auto tag, auto op) -> HostBody {
    using T = typename decltype(tag)::type;
    return [d, slots, padded, accum, lanes, lane_fold, op](const HostTile& t) {
      T* out = static_cast<T*>(t.out);
      T* const staged = static_cast<T*>(t.in[0]);  // the frame's own buffer
      for (long long at : *padded) staged[at] = decltype(op)::template identity<T>();
      const T* in = staged;
      if (d.thread_wise) {
        thread_reduce<decltype(op)>(out, in, d.view, accum);
      } else {
        lane_fold(op, lanes, t, out, in, d, slots->view, accum);
      }
    };
  });
}

HostBody local_body(const Plan& plan) {
  return lane_body<LocalPlan>(plan, [](auto op, const HostLanes& lanes, const HostTile& t, auto* out, const auto* in,
                                       const LocalPlan& d, const TableView& view, bool accum) {
    lane_reduce<decltype(op)>(lanes, out, t.out_stride, in, t.in_stride[0], view, d.masks, accum);
  });
}

HostBody shared_body(const Plan& plan) {
  return lane_body<SharedPlan>(plan, [](auto op, const HostLanes& lanes, const HostTile&, auto* out, const auto* in,
                                        const SharedPlan& d, const TableView& view, bool accum) {
    // With one round (an output per group at most), groups past the last output never write and
    // shuffle only among themselves: the CPU leaves them out. The same bits, far fewer lanes.
    const GroupShape& g = d.groups;
    const bool one_round = view.spatial <= g.groups;
    const HostLanes working{one_round ? std::min(lanes.n, g.group_size * std::max(1, view.spatial)) : lanes.n};
    shared_group_reduce<decltype(op)>(working, out, in, view, g, accum);
  });
}

HostBody packed_body(const Plan& plan) {
  const PackedPlan d = plan.detail_as<PackedPlan>();
  const bool accum = plan.call.accum;
  return reduction_body(plan, [&](auto, auto op) -> HostBody {
    using Op = decltype(op);
    if constexpr (!packed_fold<Op>::kServed) {
      throw std::logic_error(std::string("sm100_packed has no packed fold for ") + Op::kName);
    } else {
      return [d, accum](const HostTile& t) {
        packed_fold<Op>::run(static_cast<float*>(t.out), static_cast<const float*>(t.in[0]), d.view, accum);
      };
    }
  });
}

// reg on the CPU: every element's result is the op of the operands at that element, whatever
// the layout (every operand shares the anchor's placement), so the functor runs over the whole
// batch at once, in ranges across the cores: the bits of the register-by-register run.
class FlatMapRunner : public Runner {
 public:
  explicit FlatMapRunner(const Plan& plan)
      : fn_(plan.call.flag("propagate_nan") ? plan.call.def->host_map_nan : plan.call.def->host_map),
        mapped_(plan.call.def->mapped),
        elements_(plan.call.output.elements()),
        out_bytes_(dtype_size(plan.call.output.dtype)) {
    const OpCall& call = plan.call;
    proto_.out_dtype = call.output.dtype;
    proto_.in_dtype = mapped_.empty() ? call.output.dtype : call.inputs[mapped_[0]].dtype;
    proto_.threads = 1;
    proto_.operands = static_cast<int>(mapped_.size());
    for (int i : mapped_) in_bytes_.push_back(call.inputs[i].scalar ? 0 : dtype_size(call.inputs[i].dtype));
  }

  void run(const RunArgs& args) const override {
    constexpr long long kRange = 1 << 14;  // elements per item of work
    const long long total = args.tiles * elements_;
    parallel_for((total + kRange - 1) / kRange, kRange, args.interrupted, [&](long long begin, long long end, const auto& keep_going) {
      for (long long item = begin; item < end && keep_going(); ++item) {
        const long long first = item * kRange, n = std::min(kRange, total - first);
        HostMap m = proto_;
        m.slots = static_cast<int>(n);
        m.out = reinterpret_cast<unsigned char*>(args.output.data) + first * out_bytes_;
        for (size_t i = 0; i < mapped_.size(); ++i) {
          m.regs[i] = in_bytes_[i] ? reinterpret_cast<const unsigned char*>(args.inputs[mapped_[i]].data) + first * in_bytes_[i]
                                   : nullptr;
          m.scalar[i] = args.scalars[mapped_[i]];
        }
        fn_(m);
      }
    });
  }

 private:
  HostMapFn fn_;
  std::vector<int> mapped_;
  long long elements_;
  int out_bytes_;
  std::vector<int> in_bytes_;
  HostMap proto_;
};

class FlatMapExecutor : public Executor {
 public:
  std::shared_ptr<const Runner> bind(const Plan& plan) const override { return std::make_shared<FlatMapRunner>(plan); }
};

// Whole rows folded in place by Packs of lanes, where Op runs on them; else the tile frame.
template <class T, class Op>
std::shared_ptr<const Runner> rows_runner(const Plan& plan, const FoldView& view,
                                          const HostTileExecutor::MakeBody& body) {
  if constexpr (runs_on_packs<Op>::value) {
    return std::make_shared<PackedReductionRunner<T, Op>>(plan, view);
  } else {
    return std::make_shared<HostTileRunner>(plan, body(plan));
  }
}

// local and shared: thread-wise thread-scope tiles take the packed path (whole rows folded in
// place across the cores), the others the lockstep tile frame.
// The any-order fold of whole rows for a lane-scope max/min plan, or null where it does not apply.
std::shared_ptr<const Runner> rows_across(const Plan& plan, const FoldView& view) {
  std::shared_ptr<const Runner> runner;
  with_host_float(plan.call.inputs[0].dtype, [&](auto tag) {
    with_reduce_functor(reduce_functor(plan.call), [&](auto op) {
      using T = typename decltype(tag)::type;
      using Op = decltype(op);
      if constexpr (kFoldsInAnyOrder<Op> && kVectorParts<T> && runs_on_packs<Op>::value) {
        auto packed = std::make_shared<PackedReductionRunner<T, Op>>(plan, view);
        if (packed->folds_rows_across()) runner = packed;
      }
    });
  });
  return runner;
}

template <class Detail> class LaneReductionExecutor : public Executor {
 public:
  explicit LaneReductionExecutor(HostTileExecutor::MakeBody body) : body_(std::move(body)) {}

  std::shared_ptr<const Runner> bind(const Plan& plan) const override {
    const Detail& d = plan.detail_as<Detail>();
    if (plan.call.scope.kind != ScopeKind::thread || !d.thread_wise) {
      // max/min of whole rows give the same bits in any order (packed_tiles.h): the lanes'
      // groups and butterfly fold the row in one order, the CPU folds it across
      if (std::shared_ptr<const Runner> across = rows_across(plan, d.view)) return across;
      return std::make_shared<HostTileRunner>(plan, body_(plan));
    }
    std::shared_ptr<const Runner> runner;
    with_host_float(plan.call.inputs[0].dtype, [&](auto tag) {
      with_reduce_functor(reduce_functor(plan.call), [&](auto op) {
        runner = rows_runner<typename decltype(tag)::type, decltype(op)>(plan, d.view, body_);
      });
    });
    return runner;
  }

 private:
  HostTileExecutor::MakeBody body_;
};

}  // namespace

void register_cpu_executors(ExecutorTable& table) {
  table.add("local", "cpu", std::make_unique<LaneReductionExecutor<LocalPlan>>(local_body));
  table.add("cross_warp", "cpu", std::make_unique<LaneReductionExecutor<LocalPlan>>(local_body));
  table.add("shared", "cpu", std::make_unique<LaneReductionExecutor<SharedPlan>>(shared_body));
  table.add("sm100_packed", "cpu", std::make_unique<HostTileExecutor>(packed_body));
  table.add("reg", "cpu", std::make_unique<FlatMapExecutor>());
  register_cpu_treduce(table);
  register_cpu_copy(table);
  register_cpu_gather(table);
}

}  // namespace tp
