// gather -> gather (priority 10): take_along_axis and scatter_add_along_axis with their tiles in
// shared memory, at any scope: an index may point at any element of a row, which any thread of the
// instance must be able to read (a tile program restages a register tile there first, and the plan
// says so). The instance's threads take the results' elements in turn (tileprim/gather.cuh).
#include <memory>

#include "dispatch/registry.h"
#include "variants/gather/gather_plan.h"

namespace tp {
namespace {

// What the op reads: take reads x and idx; scatter reads idx and src (x only for its shape).
bool reads(const OpCall& call, size_t operand) { return call.op() != "scatter_add_along_axis" || operand > 0; }

std::string operands_shared(const OpCall& call, const DispatchContext&) {
  std::string reasons;
  auto check = [&](const TileRef& t) {
    if (is_shared(t.storage)) return;
    reasons += (reasons.empty() ? "" : "; ") + std::string("operand scope ") + storage_name(t.storage) +
               " != shared (" + t.arg + ")";
  };
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    if (reads(call, i)) check(call.inputs[i]);
  }
  check(call.output);
  return reasons.empty() ? "" : reasons + ": an index may point at any element, which every thread reads from shared "
                                          "memory";
}

OperandStaging staged(int operand, const TileRef& t, bool load, bool store) {
  OperandStaging s;
  s.operand = operand;
  s.kind = Staging::shared;
  s.dtype = t.dtype;
  s.elements = t.elements();
  s.load = load;
  s.store = store;
  s.layout = t.layout.value_or(TileLayout::row_major(t.shape));
  return s;
}

long long product(const std::vector<long long>& shape, size_t from, size_t to) {
  long long n = 1;
  for (size_t d = from; d < to; ++d) n *= shape[d];
  return n;
}

class Gather : public Variant {
 public:
  Gather() : Variant("gather", 10, OpFamily::gather, {{"operands_shared", operands_shared}}) {}

  void plan(Plan& plan) const override {
    const OpCall& call = plan.call;
    const std::vector<long long>&x = call.inputs[0].shape, &idx = call.inputs[1].shape;
    const size_t axis = static_cast<size_t>(call.axes.at(0));
    auto d = std::make_shared<GatherPlan>();
    d->scatter = call.op() == "scatter_add_along_axis";
    d->view.outer = product(x, 0, axis);
    d->view.extent = x[axis];
    d->view.picks = idx[axis];
    d->view.inner = product(x, axis + 1, x.size());
    auto memory = [](const TileRef& t) { return t.layout.value_or(TileLayout::row_major(t.shape)).memory_layout(); };
    d->view.x = d->scatter ? TileLayout::row_major(x).memory_layout() : memory(call.inputs[0]);  // scatter: unread
    d->view.idx = memory(call.inputs[1]);
    d->view.src = memory(call.inputs[d->scatter ? 2 : 1]);
    d->view.out = memory(call.output);
    plan.set("axis", static_cast<long long>(axis));
    plan.set("extent", d->view.extent);
    plan.set("picks", d->view.picks);
    plan.note("rounding", d->scatter ? "each element a sum from +0 in idx's order along the axis, in the dtype"
                                     : "none: values move unchanged (NaN payloads and signed zeros kept)");
    plan.note("out_of_range",
              d->scatter ? "an index outside [-n, n) adds nothing" : "an index outside [-n, n) gives NaN");
    for (size_t i = 0; i < call.inputs.size(); ++i) {
      if (reads(call, i)) plan.staging.push_back(staged(static_cast<int>(i), call.inputs[i], true, false));
    }
    plan.staging.push_back(staged(-1, call.output, false, true));
    plan.detail = d;
  }
};

}  // namespace

void register_gather(Registry& r) { r.add(std::make_unique<Gather>()); }

}  // namespace tp
