// treduce -> root_pull (priority 10): the seed's algorithm. The root pulls every rank's chunk
// and folds it into its accumulator, chunk after chunk: acc/recv, or acc/ping/pong with the
// next rank's chunk loading while the current one is folded. On a GPU the root's CTAs each
// take pieces of the chunks and read the other GPUs' memory directly (peer access), or a
// staged copy where there is none. It runs every call; automatic dispatch takes it where the
// cost model expects no other algorithm faster (small messages: one hop), and on the CPU.
#include <memory>

#include "variants/comm/treduce_common.h"

namespace tp {
namespace {

class RootPull : public Variant {
 public:
  RootPull() : Variant("root_pull", 10, OpFamily::collective, {}) {}

  void plan(Plan& plan) const override {
    plan_treduce(plan, std::make_shared<TreducePlan>(), {plan.call.treduce->root}, "root_pull");
  }
};

}  // namespace

void register_treduce_root_pull(Registry& r) { r.add(std::make_unique<RootPull>()); }

}  // namespace tp
