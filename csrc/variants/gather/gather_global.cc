// gather -> gather_global (priority 20): take_along_axis of a program's input where it lies in
// global memory. A pick of one element per row (cross-entropy's logit at its label) needs that
// element, not the row: x is never staged (gather would copy the whole row into shared memory for
// it), and idx and the result stay in the threads' registers, every thread holding each element,
// where the steps around them (ne, sub, where on one value per row) hold them. Each thread loads
// its picks by index (tileprim/gather.cuh, take_along_axis_global). The program planner offers x
// in global memory only where x is one of its inputs; a standalone call stages every operand
// alike, so this variant declines it and gather runs.
#include <memory>

#include "dispatch/registry.h"
#include "layout/placement.h"
#include "variants/gather/gather_plan.h"
#include "variants/staged_operand.h"

namespace tp {
namespace {

std::string takes(const OpCall& call, const DispatchContext&) {
  return call.op() == "take_along_axis" ? "" : "op " + call.op() + ": only take_along_axis reads x by index";
}

std::string x_global(const OpCall& call, const DispatchContext&) {
  const TileRef& x = call.inputs.at(0);
  return x.storage == Storage::global
             ? ""
             : std::string("operand scope ") + storage_name(x.storage) +
                   " != global (x): it reads a program's input where it lies, which the program planner offers";
}

std::string held_by_every_thread(const OpCall& call, const DispatchContext&) {
  std::string reasons;
  for (const TileRef* t : {&call.inputs.at(1), &call.output}) {
    if (!replicated(*t, call.scope)) {
      reasons += (reasons.empty() ? "" : "; ") + t->arg + " is not in registers with every thread of " +
                 call.scope.str() + " holding each element";
    }
  }
  return reasons;
}

class GatherGlobal : public Variant {
 public:
  GatherGlobal()
      : Variant("gather_global", 20, OpFamily::gather,
                {{"take", takes}, {"x_global", x_global}, {"held_by_every_thread", held_by_every_thread}}) {}

  void plan(Plan& plan) const override {
    const OpCall& call = plan.call;
    auto d = std::make_shared<GatherPlan>();
    d->global_source = true;
    d->view = viewed(plan);
    plan.set("wide_side", std::string("global"));
    plan.note("rounding", "none: values move unchanged (NaN payloads and signed zeros kept)");
    plan.note("out_of_range", "an index outside [-n, n) gives NaN and loads nothing");
    plan.note("source", "x read where it lies in global memory, one load per pick by every thread that holds it; "
                        "the row is never staged");
    OperandStaging x;
    x.operand = 0;
    x.kind = Staging::global;
    x.dtype = call.inputs[0].dtype;
    x.elements = call.inputs[0].elements();
    plan.staging.push_back(x);
    plan.staging.push_back(staged_operand(1, call.inputs[1], call.scope, true, false, call.inputs[1].arg));
    plan.staging.push_back(staged_operand(-1, call.output, call.scope, false, true, call.output.arg));
    plan.detail = d;
  }
};

}  // namespace

bool replicated(const TileRef& t, const ExecScope& scope) {
  if (t.storage != Storage::local || !t.layout) return false;
  return place_in_registers(*t.layout, scope, t.arg)->whole_in_every_thread(t.elements());
}

void register_gather_global(Registry& r) { r.add(std::make_unique<GatherGlobal>()); }

}  // namespace tp
