// copy -> stage (priority 10): a tile restaged from one placement to another: registers of
// some threads, or a shared tile, to registers or a shared tile of any layout; inside a
// program also broadcast to a larger shape (a keepdims reduction's result spread back over
// the threads of its row). Values move unchanged: no rounding, NaN payloads kept.
#include <memory>

#include "dispatch/registry.h"
#include "errors.h"
#include "variants/staged_operand.h"

namespace tp {
namespace {

std::string same_dtype(const OpCall& call, const DispatchContext&) {
  const TileRef& src = call.inputs.at(0);
  if (src.dtype == call.output.dtype) return "";
  return std::string("dtype mismatch: out ") + dtype_name(call.output.dtype) + ", src " + dtype_name(src.dtype) +
         " (a copy moves values; tp.cast converts them)";
}

std::string placement_str(const TileRef& t) {
  return std::string(storage_name(t.storage)) + " " + t.layout.value_or(TileLayout::row_major(t.shape)).str();
}

class StageCopy : public Variant {
 public:
  StageCopy() : Variant("stage", 10, OpFamily::restage, {{"same_dtype", same_dtype}}) {}

  void plan(Plan& plan) const override {
    const OpCall& call = plan.call;
    const TileRef& src = call.inputs[0];
    const TileRef& dst = call.output;
    const bool broadcast = src.shape != dst.shape;
    // Whether a thread may read what another wrote: then the scope's barrier comes first.
    const bool crosses = call.scope.threads > 1 &&
                         (is_shared(src.storage) || is_shared(dst.storage) || broadcast || !(src.layout == dst.layout));
    plan.set("from", placement_str(src));
    plan.set("to", placement_str(dst));
    plan.set("broadcast", broadcast);
    plan.set("sync", std::string(!crosses ? "none"
                                 : call.scope.kind == ScopeKind::cluster     ? "cluster_sync"
                                 : call.scope.kind == ScopeKind::cta         ? "cta_sync"
                                 : call.scope.kind == ScopeKind::warpgroup ? "warpgroup_sync"
                                                                           : "warp_sync"));
    plan.note("rounding", "none: values move unchanged (NaN payloads and signed zeros kept)");
    plan.note("order", broadcast ? "out element i reads src at i's coordinates, size-1 dims of src held at 0"
                                 : "out element i reads src element i");
    plan.staging = {staged_operand(0, src, call.scope, true, false, "layout"),
                    staged_operand(-1, dst, call.scope, false, true, "out_layout")};
  }
};

}  // namespace

void register_copy_stage(Registry& r) { r.add(std::make_unique<StageCopy>()); }

}  // namespace tp
