// treduce -> scatter_gather (priority 20): for 3+ ranks, every non-root rank reduces one shard
// of the pieces, in the same order (reading the root and every other rank), and writes it
// into the root's dst: the root's ingress is one tensor instead of N - 1, and every GPU's
// links and SMs work. Chosen where the cost model (treduce_choice.h) expects it fastest;
// dispatch= forces it anywhere (the CPU backend runs it too, shard by shard, for the same
// bits). Across processes every worker runs its own shard where the transport reaches every
// rank (CUDA IPC maps their memory; NCCL sends each worker its slices); over shared memory the
// root's process runs them.
#include <memory>

#include "variants/comm/treduce_choice.h"
#include "variants/comm/treduce_common.h"

namespace tp {
namespace {

std::vector<int> non_root(const OpCall& call) {
  std::vector<int> out;
  const int root = call.treduce->root;
  for (int r = 0; r < static_cast<int>(call.inputs.size()); ++r) {
    if (r != root) out.push_back(r);
  }
  return out;
}

std::string runs(const OpCall& call, const DispatchContext& ctx) {
  return treduce::why_not("scatter_gather", call, ctx);
}

std::string fastest(const OpCall& call, const DispatchContext& ctx) {
  return treduce::costlier("scatter_gather", call, ctx);
}

class ScatterGather : public Variant {
 public:
  ScatterGather()
      : Variant("scatter_gather", 20, OpFamily::collective, {{"ranks_and_links", runs}, {"fastest", fastest, true}}) {}

  void plan(Plan& plan) const override {
    plan_treduce(plan, std::make_shared<TreducePlan>(), non_root(plan.call), "scatter_gather");
  }
};

}  // namespace

void register_treduce_scatter_gather(Registry& r) { r.add(std::make_unique<ScatterGather>()); }

}  // namespace tp
