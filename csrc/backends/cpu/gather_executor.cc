// gather -> gather on the CPU: the tile frame stages the shared tiles and runs the device
// template (tileprim/gather.cuh) on the instance's lanes in lockstep, as the GPU's threads run it.
#include "backends/cpu/gather_executor.h"

#include <type_traits>

#include "backends/cpu/host_lanes.h"
#include "backends/cpu/tile_frame.h"
#include "ops/host_types.h"
#include "variants/gather/gather_plan.h"

namespace tp {

namespace {

HostBody gather_body(const Plan& plan) {
  const GatherPlan d = plan.detail_as<GatherPlan>();
  const int threads = plan.call.scope.threads;
  const HostLanes lanes{threads};
  HostBody body;
  with_host_float(plan.call.inputs[0].dtype, [&](auto value_tag) {
    with_host_value(plan.call.inputs[1].dtype, [&](auto index_tag) {
      using T = typename decltype(value_tag)::type;
      using I = typename decltype(index_tag)::type;
      if constexpr (std::is_integral_v<I>) {
        body = [d, lanes, threads](const HostTile& t) {
          T* out = static_cast<T*>(t.out);
          const I* idx = static_cast<const I*>(t.in[1]);
          if (d.scatter) {
            scatter_add_along_axis(lanes, threads, out, idx, static_cast<const T*>(t.in[2]), d.view);
          } else {
            take_along_axis(lanes, threads, out, static_cast<const T*>(t.in[0]), idx, d.view);
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
}

}  // namespace tp
