// treduce -> chain (priority 30): the partial result travels rank to rank in the fold order --
// the root's value first, then the other ranks ascending -- step by step and pipelined, ending
// in the root's dst (tileprim/comm/chain.cuh). Every link carries about one tensor and the root
// takes in one (NCCL's ring reduce moves as much), where root_pull's root takes in N - 1 and
// scatter_gather's GPUs move theirs twice; it pays a hop per rank before the first step lands,
// so it wins for large messages on 3+ ranks (the cost model's call, treduce_choice.h). In one
// process every rank needs a GPU of its own and peer access to its neighbours; across processes
// CUDA IPC maps each rank's neighbours' staging, and NCCL sends each step's partial on.
#include <memory>

#include "variants/comm/treduce_choice.h"
#include "variants/comm/treduce_common.h"

namespace tp {
namespace {

std::string runs(const OpCall& call, const DispatchContext& ctx) { return treduce::why_not("chain", call, ctx); }

std::string fastest(const OpCall& call, const DispatchContext& ctx) { return treduce::costlier("chain", call, ctx); }

class Chain : public Variant {
 public:
  Chain() : Variant("chain", 30, OpFamily::collective, {{"gpus_and_links", runs}, {"fastest", fastest, true}}) {}

  void plan(Plan& plan) const override {
    auto detail = std::make_shared<ChainPlan>();
    detail->layout = chain_layout(plan.call);
    std::vector<int> everyone;
    for (int r = 0; r < static_cast<int>(plan.call.inputs.size()); ++r) everyone.push_back(r);
    plan_treduce(plan, detail, everyone, "chain");
  }
};

}  // namespace

void register_treduce_chain(Registry& r) { r.add(std::make_unique<Chain>()); }

}  // namespace tp
