// gather -> scatter_held (priority 20): scatter_add_along_axis of one value per row into a row
// (take_along_axis's derivative at a label: the one-hot of cross-entropy's gradient), idx and src
// in every thread's registers, where the steps around them (ne, where, mul on one value per row)
// hold them, and the result in registers spread as maps take it. Each thread finds the index's
// position once and fills its own slots from its own copies (tileprim/gather.cuh,
// scatter_one_held), with no exchange: a program running in
// passes over chunks of its rows computes each chunk's slots so (row_staging), where gather's
// shared idx and src would keep the rows in registers whole.
#include <memory>

#include "dispatch/registry.h"
#include "layout/placement.h"
#include "variants/gather/gather_plan.h"
#include "variants/staged_operand.h"

namespace tp {
namespace {

std::string scatters(const OpCall& call, const DispatchContext&) {
  return call.op() == "scatter_add_along_axis" ? "" : "op " + call.op() + ": only scatter_add_along_axis sums src";
}

std::string held(const OpCall& call, const DispatchContext&) {
  if (call.inputs.size() < 3) return "";  // a take: `scatter` declines it
  std::string reasons;
  for (const TileRef* t : {&call.inputs.at(1), &call.inputs.at(2)}) {
    if (!replicated(*t, call.scope)) {
      reasons += (reasons.empty() ? "" : "; ") + t->arg + " is not in registers with every thread of " +
                 call.scope.str() + " holding each element";
    }
  }
  if (call.output.storage != Storage::local || !call.output.layout) {
    reasons += (reasons.empty() ? "" : "; ") + std::string("out is not in registers");
  }
  const GatherView v = gather_view(call);
  if (v.picks != 1 || v.outer != 1 || v.inner != 1) {
    reasons += (reasons.empty() ? "" : "; ") + std::string("not one value into one row (picks ") +
               std::to_string(v.picks) + ", " + std::to_string(v.outer * v.inner) + " rows)";
  }
  return reasons;
}

// Within one CTA, as the other gather variants: no gather op has yet run across a cluster's CTAs
std::string in_a_cta(const OpCall& call, const DispatchContext&) {
  return call.scope.ctas > 1 ? "scope " + call.scope.str() + ": the gather ops run within one CTA" : "";
}

class ScatterHeld : public Variant {
 public:
  ScatterHeld()
      : Variant("scatter_held", 20, OpFamily::gather, {{"scatter", scatters}, {"held", held}, {"in_a_cta", in_a_cta}}) {}

  void plan(Plan& plan) const override {
    const OpCall& call = plan.call;
    auto d = std::make_shared<GatherPlan>();
    d->scatter = d->held_picks = true;
    d->view = viewed(plan);
    plan.set("wide_side", std::string("registers"));
    plan.note("rounding", "each element a sum from +0 in idx's order along the axis, in the dtype");
    plan.note("out_of_range", "an index outside [-n, n) adds nothing");
    for (int i : {1, 2}) {
      plan.staging.push_back(staged_operand(i, call.inputs[i], call.scope, true, false, call.inputs[i].arg));
    }
    plan.staging.push_back(staged_operand(-1, call.output, call.scope, false, true, call.output.arg));
    d->held = plan.staging.back().place;
    plan.detail = d;
  }
};

}  // namespace

void register_scatter_held(Registry& r) { r.add(std::make_unique<ScatterHeld>()); }

}  // namespace tp
