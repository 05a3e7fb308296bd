// gather -> gather (priority 10): take_along_axis and scatter_add_along_axis at any scope, the index
// tile and the small side (take's result, scatter's src) in shared memory, where every thread
// reads them, the wide side (take's x, scatter's result) there too or in the threads' registers,
// where a program holds a row (tileprim/gather.cuh). A tile program restages what lies elsewhere,
// and its plan says why.
#include <memory>

#include "dispatch/registry.h"
#include "variants/gather/gather_plan.h"
#include "variants/staged_operand.h"

namespace tp {
namespace {

// What the op reads: take reads x and idx; scatter reads idx and src (x only for its shape).
bool reads(const OpCall& call, size_t operand) { return call.op() != "scatter_add_along_axis" || operand > 0; }
// The wide side: take's x, scatter's result (operand -1).
bool wide(const OpCall& call, int operand) { return operand == (call.op() == "scatter_add_along_axis" ? -1 : 0); }

std::string placed(const OpCall& call, const DispatchContext&) {
  std::string reasons;
  auto check = [&](const TileRef& t, int operand) {
    if (is_shared(t.storage) || (t.storage == Storage::local && wide(call, operand))) return;
    reasons += (reasons.empty() ? "" : "; ") + std::string("operand scope ") + storage_name(t.storage) +
               " != shared (" + t.arg + ")";
  };
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    if (reads(call, i)) check(call.inputs[i], static_cast<int>(i));
  }
  check(call.output, -1);
  return reasons.empty() ? "" : reasons + ": every thread reads the index tile and the picked values in shared memory";
}


class Gather : public Variant {
 public:
  Gather() : Variant("gather", 10, OpFamily::gather, {{"placed", placed}}) {}

  void plan(Plan& plan) const override {
    const OpCall& call = plan.call;
    auto d = std::make_shared<GatherPlan>();
    d->scatter = call.op() == "scatter_add_along_axis";
    d->view = viewed(plan);
    plan.note("rounding", d->scatter ? "each element a sum from +0 in idx's order along the axis, in the dtype"
                                     : "none: values move unchanged (NaN payloads and signed zeros kept)");
    plan.note("out_of_range",
              d->scatter ? "an index outside [-n, n) adds nothing" : "an index outside [-n, n) gives NaN");
    for (size_t i = 0; i < call.inputs.size(); ++i) {
      if (reads(call, i)) {
        plan.staging.push_back(staged_operand(static_cast<int>(i), call.inputs[i], call.scope, true, false,
                                              call.inputs[i].arg));
      }
    }
    plan.staging.push_back(staged_operand(-1, call.output, call.scope, false, true, call.output.arg));
    for (const OperandStaging& st : plan.staging) {
      if (st.kind == Staging::registers) d->held = st.place;
    }
    plan.set("wide_side", std::string(d->held ? "registers" : "shared"));
    plan.detail = d;
  }
};

}  // namespace

GatherView gather_view(const OpCall& call) {
  const std::vector<long long>&x = call.inputs[0].shape, &idx = call.inputs[1].shape;
  const size_t axis = static_cast<size_t>(call.axes.at(0));
  auto product = [](const std::vector<long long>& shape, size_t from, size_t to) {
    long long n = 1;
    for (size_t d = from; d < to; ++d) n *= shape[d];
    return n;
  };
  // a tile in registers or global memory: row-major (unread in registers; a program's input as it lies)
  auto memory = [](const TileRef& t) {
    return (is_shared(t.storage) && t.layout ? *t.layout : TileLayout::row_major(t.shape)).memory_layout();
  };
  const bool scatter = call.op() == "scatter_add_along_axis";
  GatherView v{};
  v.outer = product(x, 0, axis);
  v.extent = x[axis];
  v.picks = idx[axis];
  v.inner = product(x, axis + 1, x.size());
  v.x = memory(call.inputs[0]);
  v.idx = memory(call.inputs[1]);
  v.src = memory(call.inputs[scatter ? 2 : 1]);
  v.out = memory(call.output);
  return v;
}

GatherView viewed(Plan& plan) {
  const GatherView v = gather_view(plan.call);
  plan.set("axis", static_cast<long long>(plan.call.axes.at(0)));
  plan.set("extent", v.extent);
  plan.set("picks", v.picks);
  return v;
}

void register_gather(Registry& r) { r.add(std::make_unique<Gather>()); }

}  // namespace tp
