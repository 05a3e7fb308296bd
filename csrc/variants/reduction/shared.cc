// reduction -> shared (priority 10): source and destination in shared memory.
//   thread scope: the thread-wise loop of reduction -> local, on shared memory.
//   warp / warpgroup / cta: groups of G = min(next_pow2(reduction_len), 32, prev_pow2(threads))
//   lanes, one output per group at a time; lane l gathers sources l, l+G, ...; an XOR
//   butterfly of width G; lane 0 of the group writes; then the scope's barrier.
// The reference takes min(..., threads) itself; for thread counts that are not a power of
// two below 32 that is not a butterfly width, so the largest power of two <= threads is
// used. Threads past the last whole group idle, so any thread count is correct.
#include <algorithm>
#include <memory>

#include "dispatch/registry.h"
#include "dispatch/architecture.h"
#include "errors.h"
#include "variants/reduction/reduction_common.h"

namespace tp {
namespace {

long long next_pow2(long long x) {
  long long p = 1;
  while (p < x) p *= 2;
  return p;
}
long long prev_pow2(long long x) {
  long long p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}

std::string shared_valid(const OpCall& call, const DispatchContext&) {
  const TileRef& src = call.inputs.at(0);
  if (src.dtype != call.output.dtype) {
    return std::string("dtype mismatch: dst ") + dtype_name(call.output.dtype) + ", src " + dtype_name(src.dtype);
  }
  const ReductionAxes ax = reduction_axes(call);
  if (call.output.layout && call.output.layout->size() != ax.spatial_len) {
    return "dst size " + std::to_string(call.output.layout->size()) + " != expected spatial size " +
           std::to_string(ax.spatial_len);
  }
  return "";
}

class SharedReduction : public Variant {
 public:
  SharedReduction()
      : Variant("shared", 10, OpFamily::reduction,
                {storage_predicate(true), {"shared_valid", shared_valid}}) {}

  void plan(Plan& plan) const override {
    const OpCall& call = plan.call;
    const ReductionAxes ax = reduction_axes(call);
    auto p = std::make_shared<SharedPlan>();
    const TileLayout src = call.inputs[0].layout.value_or(TileLayout::row_major(ax.src_shape));
    const TileLayout dst = call.output.layout.value_or(TileLayout::row_major(ax.dst_shape));
    p->view = fold_view(src, src.group(ax.src_shape), ax.reduced, dst, dst.group(ax.dst_shape));
    const long long bytes = (src.span() + dst.span()) * dtype_size(call.inputs[0].dtype);
    const long long limit = target_limits(plan.context.target).shared_per_block;
    if (bytes > limit) {
      throw Decline("shared memory: the src and dst tiles need " + std::to_string(bytes) + " bytes; a block has at most " +
                        shared_bytes_str(limit),
                    /*past_limit=*/true);
    }
    p->thread_wise = call.scope.kind == ScopeKind::thread;
    plan.call.output.layout = dst;
    plan.call.output.shape = ax.dst_shape;
    plan.set("path", std::string(p->thread_wise ? "thread_wise" : "group_shuffle"));
    plan.set("spatial_len", ax.spatial_len);
    plan.set("reduction_len", ax.reduce_len);
    if (!p->thread_wise) {
      const long long threads = call.scope.threads;
      const long long G = std::max(1ll, std::min({next_pow2(ax.reduce_len), 32ll, prev_pow2(threads)}));
      GroupShape& g = p->groups;
      g.group_size = static_cast<int>(G);
      g.groups = static_cast<int>(threads / G);
      g.masks = {0, {}, g.group_size};
      for (int m = 1; m < G; m *= 2) g.masks.mask[g.masks.count++] = m;
      plan.set("group_size", G);
      plan.set("n_shuffles", static_cast<long long>(g.masks.count));
      plan.set("groups", static_cast<long long>(g.groups));
      plan.set("working_threads", static_cast<long long>(g.groups) * G);
      plan.set("steps", (ax.spatial_len + g.groups - 1) / g.groups);
      const char* sync = call.scope.kind == ScopeKind::cta         ? "cta_sync"
                         : call.scope.kind == ScopeKind::warpgroup ? "warpgroup_sync"
                                                                   : "warp_sync";
      plan.set("sync", std::string(sync));
    }
    note_reduction_numerics(plan);
    plan.note("order", p->thread_wise
                           ? "one thread folds the sources in order, from the identity (accum: from the old value)"
                           : "lane l folds sources l, l+G, l+2G, ... from the identity; then XOR butterfly with "
                             "masks 1, 2, 4, ... < G; accum: op(old, result)");
    plan.note("ftz", "no: subnormals kept");
    stage_shared(plan, src, dst);
    plan.detail = p;
  }
};

}  // namespace

void register_reduction_shared(Registry& r) { r.add(std::make_unique<SharedReduction>()); }

}  // namespace tp
