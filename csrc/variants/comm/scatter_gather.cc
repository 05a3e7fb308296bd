// treduce -> scatter_gather (priority 20): for 3+ ranks, every non-root rank reduces one shard
// of the pieces, in the same order (reading the root and every other rank), and writes it
// into the root's dst: the root's ingress is one tensor instead of N - 1, and every GPU's
// links and SMs work. Preferred on GPUs for messages of 1 MiB and more; dispatch= forces it
// anywhere (the CPU backend runs it too, shard by shard, for the same bits). Across processes
// every worker runs its own shard where the transport reaches every rank (CUDA IPC maps their
// memory; NCCL sends each worker its slices); over shared memory the root's process runs them.
#include <memory>

#include "variants/comm/treduce_common.h"

namespace tp {
namespace {

// Below this, root_pull's single hop is faster than a second GPU round.
constexpr long long kMinBytesPerRank = 1 << 20;

std::vector<int> non_root(const OpCall& call) {
  std::vector<int> out;
  const int root = call.treduce->root;
  for (int r = 0; r < static_cast<int>(call.inputs.size()); ++r) {
    if (r != root) out.push_back(r);
  }
  return out;
}

std::string ranks(const OpCall& call, const DispatchContext&) {
  const size_t n = call.inputs.size();
  return n >= 3 ? "" : std::to_string(n) + " ranks; scatter_gather needs 3 or more (with 2, root_pull's one hop is all)";
}

std::string peer_access(const OpCall& call, const DispatchContext& ctx) {
  return missing_peer_access(call, ctx, non_root(call));
}

std::string message_size(const OpCall& call, const DispatchContext& ctx) {
  if (ctx.backend != "cuda") return "the cpu backend has one engine for every rank; root_pull moves less";
  const long long bytes = call.inputs[0].elements() * dtype_size(call.inputs[0].dtype);
  if (bytes >= kMinBytesPerRank) return "";
  return std::to_string(bytes) + " bytes per rank < 1 MiB: root_pull's single hop is faster";
}

class ScatterGather : public Variant {
 public:
  ScatterGather()
      : Variant("scatter_gather", 20, OpFamily::collective,
                {{"ranks", ranks}, {"peer_access", peer_access}, {"message_size", message_size, true}}) {}

  void plan(Plan& plan) const override { plan_treduce(plan, non_root(plan.call), "scatter_gather"); }
};

}  // namespace

void register_treduce_scatter_gather(Registry& r) { r.add(std::make_unique<ScatterGather>()); }

}  // namespace tp
