// gather -> gather on the CPU: the tile frame stages the shared tiles and runs the device
// template (tileprim/gather.cuh) on the instance's lanes in lockstep, as the GPU's threads run it.
#include "backends/cpu/gather_executor.h"

#include <memory>
#include <type_traits>

#include "backends/cpu/host_lanes.h"
#include "backends/cpu/tile_frame.h"
#include "ops/host_types.h"
#include "variants/gather/gather_plan.h"

namespace tp {

namespace {

// A register placement as the device templates ask it: which element each lane's slot holds.
struct HostPlace {
  std::shared_ptr<const RegisterPlacement> p;
  int load_element(int lane, int s) const { return p->element_at(lane, s); }
  int store_element(int lane, int s) const { return p->store[static_cast<size_t>(s) * p->threads + lane]; }
};

HostBody gather_body(const Plan& plan) {
  const GatherPlan d = plan.detail_as<GatherPlan>();
  const int threads = plan.call.scope.threads;
  const HostLanes lanes{threads};
  const HostPlace place{d.held};
  HostBody body;
  with_host_float(plan.call.inputs[0].dtype, [&](auto value_tag) {
    with_host_value(plan.call.inputs[1].dtype, [&](auto index_tag) {
      using T = typename decltype(value_tag)::type;
      using I = typename decltype(index_tag)::type;
      if constexpr (std::is_integral_v<I>) {
        body = [d, lanes, threads, place](const HostTile& t) {
          const I* idx = static_cast<const I*>(t.in[1]);
          if (d.scatter) {
            const T* src = static_cast<const T*>(t.in[2]);
            if (d.held_picks) {
              scatter_one_held<1>(lanes, place, d.held->slots, static_cast<T*>(t.out), t.out_stride, idx,
                                  t.in_stride[1], src, t.in_stride[2], d.view.extent);
            } else if (d.held) {
              scatter_add_along_axis<1>(lanes, place, d.held->slots, static_cast<T*>(t.out), t.out_stride, idx, src,
                                        d.view);
            } else {
              scatter_add_along_axis(lanes, threads, static_cast<T*>(t.out), idx, src, d.view);
            }
          } else if (d.global_source) {
            take_along_axis_global<1>(lanes, static_cast<T*>(t.out), t.out_stride, static_cast<const T*>(t.in[0]), idx,
                                      t.in_stride[1], static_cast<int>(d.view.outer * d.view.picks * d.view.inner),
                                      d.view);
          } else if (d.held) {
            take_along_axis<1>(lanes, place, threads, d.held->slots, static_cast<T*>(t.out),
                               static_cast<const T*>(t.in[0]), t.in_stride[0], idx, d.view);
          } else {
            take_along_axis(lanes, threads, static_cast<T*>(t.out), static_cast<const T*>(t.in[0]), idx, d.view);
          }
        };
      }
    });
  });
  return body;
}

}  // namespace

void register_cpu_gather(ExecutorTable& table) {
  table.add("gather", "cpu", std::make_unique<HostTileExecutor>(gather_body));
  table.add("gather_global", "cpu", std::make_unique<HostTileExecutor>(gather_body));
  table.add("scatter_held", "cpu", std::make_unique<HostTileExecutor>(gather_body));
}

}  // namespace tp
