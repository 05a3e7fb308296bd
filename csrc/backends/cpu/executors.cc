// The CPU executors of the tile variants: each is the variant's body, the same device
// template the CUDA kernel calls, run on one scope instance with HostLanes; the tile frame
// (tile_frame.cc) does the rest.
#include "backends/cpu/executors.h"

#include "backends/cpu/host_lanes.h"
#include "backends/cpu/reduce_ops.h"
#include "backends/cpu/tile_frame.h"
#include "backends/cpu/treduce_executor.h"
#include "ops/host_types.h"
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
    with_reduce_op(reduce_kind(plan.call), [&](auto op) { body = f(tag, op); });
  });
  return body;
}

HostBody local_body(const Plan& plan) {
  const LocalPlan d = plan.detail_as<LocalPlan>();
  const bool accum = plan.call.accum;
  const HostLanes lanes{plan.call.scope.threads};
  return reduction_body(plan, [&](auto tag, auto op) -> HostBody {
    using T = typename decltype(tag)::type;
    using Op = decltype(op);
    return [d, accum, lanes](const HostTile& t) {
      if (d.thread_wise) {
        thread_reduce<Op>(static_cast<T*>(t.out), static_cast<const T*>(t.in[0]), d.view, accum);
      } else {
        lane_reduce<Op>(lanes, static_cast<T*>(t.out), t.out_stride, static_cast<const T*>(t.in[0]), t.in_stride[0],
                        d.view, d.masks, accum);
      }
    };
  });
}

HostBody shared_body(const Plan& plan) {
  const SharedPlan d = plan.detail_as<SharedPlan>();
  const bool accum = plan.call.accum;
  const HostLanes lanes{plan.call.scope.threads};
  return reduction_body(plan, [&](auto tag, auto op) -> HostBody {
    using T = typename decltype(tag)::type;
    using Op = decltype(op);
    return [d, accum, lanes](const HostTile& t) {
      if (d.thread_wise) {
        thread_reduce<Op>(static_cast<T*>(t.out), static_cast<const T*>(t.in[0]), d.view, accum);
      } else {
        shared_group_reduce<Op>(lanes, static_cast<T*>(t.out), static_cast<const T*>(t.in[0]), d.view, d.groups, accum);
      }
    };
  });
}

HostBody packed_body(const Plan& plan) {
  const PackedPlan d = plan.detail_as<PackedPlan>();
  const bool accum = plan.call.accum;
  return reduction_body(plan, [&](auto, auto op) -> HostBody {
    using Op = decltype(op);
    return [d, accum](const HostTile& t) {
      float* dst = static_cast<float*>(t.out);
      const float* src = static_cast<const float*>(t.in[0]);
      if constexpr (std::is_same_v<Op, reduce_op::Sum>) {
        packed_add_sum(dst, src, d.view, accum);
      } else {
        packed_three_input_maxmin<Op>(dst, src, d.view, accum);
      }
    };
  });
}

// The op table's host functor over every thread's bundle.
HostBody map_body(const Plan& plan) {
  const OpCall& call = plan.call;
  const HostMapFn fn = call.flag("propagate_nan") ? call.def->host_map_nan : call.def->host_map;
  const OperandStaging& out = plan.staged_output();
  HostMap proto;
  proto.out_dtype = call.output.dtype;
  proto.in_dtype = call.def->mapped.empty() ? call.output.dtype : call.inputs[call.def->mapped[0]].dtype;
  proto.threads = out.place->threads;
  proto.slots = out.place->slots;
  proto.operands = static_cast<int>(call.def->mapped.size());
  const std::vector<int> mapped = call.def->mapped;
  return [fn, proto, mapped](const HostTile& t) {
    HostMap m = proto;
    m.out = t.out;
    for (size_t i = 0; i < mapped.size(); ++i) {
      m.regs[i] = t.in[mapped[i]];
      m.scalar[i] = t.scalars[mapped[i]];
    }
    fn(m);
  };
}

}  // namespace

void register_cpu_executors(ExecutorTable& table) {
  table.add("local", "cpu", std::make_unique<HostTileExecutor>(local_body));
  table.add("shared", "cpu", std::make_unique<HostTileExecutor>(shared_body));
  table.add("sm100_packed", "cpu", std::make_unique<HostTileExecutor>(packed_body));
  table.add("reg", "cpu", std::make_unique<HostTileExecutor>(map_body));
  register_cpu_treduce(table);
}

}  // namespace tp
