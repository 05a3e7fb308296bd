// elementwise -> reg (priority 10): every operand in registers, partitioned by the anchor's
// (the output's) layout: the thread axes pick the thread, what remains is that thread's
// private bundle, and the op's functor (from the op table) is applied register by register.
#include <memory>

#include "dispatch/registry.h"
#include "errors.h"
#include "layout/placement.h"

namespace tp {
namespace {

const TileLayout& anchor_of(const OpCall& call) { return *call.output.layout; }

std::string operand_scope(const OpCall& call, const DispatchContext&) {
  std::string reasons;
  auto check = [&](const TileRef& t) {
    if (!t.scalar && t.storage != Storage::local) {
      reasons += (reasons.empty() ? "" : "; ") + std::string("operand scope ") + storage_name(t.storage) +
                 " != local (" + t.arg + ")";
    }
  };
  for (const TileRef& t : call.inputs) check(t);
  check(call.output);
  return reasons;
}

std::string anchor_layout(const OpCall& call, const DispatchContext&) {
  return anchor_of(call).swizzled() ? "anchor layout is swizzle" : "";
}

// Every thread of the scope holds a part of the anchor (or a padded row's slots, some past its end:
// those threads compute what nothing reads); the placement goes on to the planner.
Analysis scope_anchor(const OpCall& call, const DispatchContext&) {
  if (call.scope.kind == ScopeKind::thread) return nullptr;
  const TileLayout& anchor = anchor_of(call);
  if (!anchor.has_thread_axes()) {
    throw Decline("got a thread-local view with no thread axes; pass the " + call.scope.kind_name() +
                  "-level tile's layout (e.g. S[(32, 8) : (1@laneid, 1)])");
  }
  auto p = place_in_registers(anchor, call.scope, "out_layout");
  int covered = 0;
  for (int t = 0; t < p->threads; ++t) {
    for (int s = 0; s < p->slots; ++s) {
      if (p->element_at(t, s) >= 0) {
        ++covered;
        break;
      }
    }
  }
  if (covered == p->threads || anchor.padded()) return p;
  throw Decline("layout covers " + std::to_string(covered) + " of the " + std::to_string(p->threads) +
                " threads of " + call.scope.str() + " scope; reg needs every thread of the scope");
}

std::string operand_layouts(const OpCall& call, const DispatchContext&) {
  std::string reasons;
  for (const TileRef& t : call.inputs) {
    if (t.scalar || !t.layout || *t.layout == anchor_of(call)) continue;
    reasons += (reasons.empty() ? "" : "; ") + t.arg + " layout " + t.layout->str() + " differs from the anchor's " +
               anchor_of(call).str();
  }
  return reasons;
}

class RegElementwise : public Variant {
 public:
  RegElementwise()
      : Variant("reg", 10, OpFamily::elementwise,
                {{"operand_scope", operand_scope},
                 {"anchor_layout", anchor_layout},
                 analysing("scope_anchor", scope_anchor),
                 {"operand_layouts", operand_layouts}}) {}

  void plan(Plan& plan) const override {
    const OpCall& call = plan.call;
    std::shared_ptr<const RegisterPlacement> place = std::static_pointer_cast<const RegisterPlacement>(plan.analysis);
    if (!place) place = place_in_registers(anchor_of(call), call.scope, "out_layout");
    long long bundle = 0;
    for (int s = 0; s < place->slots; ++s) bundle += place->element_at(0, s) >= 0;
    plan.set("registers_per_thread", static_cast<long long>(place->slots));
    plan.set("bundle", bundle);
    plan.set("vec_len", 1ll);
    const DType t = call.output.dtype;
    const DType compute = call.inputs[0].scalar ? t : call.inputs[0].dtype;
    plan.note("compute_dtype", dtype_name(compute));
    // fastmath=True: what a GPU runs is noted whichever backend plans (tp.lower builds GPU kernels
    // from plans of host arrays); the rounding is the backend's
    const bool fast = call.def->approximated(call.flag("fastmath"), t);
    const bool on_gpu = fast && plan.context.backend == "cuda";
    const std::string exact = call.def->exact_for(compute)
                                  ? "exactly rounded (round to nearest even)"
                                  : "tileprim's own algorithm (op_table()[op]['max_ulp'])";
    // a form only a division by one value takes: a tile divisor is one value where a program broadcasts
    // one (a row's sum), which this step's call does not tell
    const int one = call.def->fast_by_one_value;
    const std::string which = one >= 0 && !call.inputs[one].scalar
                                  ? " where " + call.def->operands.at(one) + " is one value for the tile (a tile of "
                                    "values: IEEE)"
                                  : "";
    plan.note("rounding", on_gpu ? "fastmath: the GPU's approximation (op_table()[op]['fastmath'])" + which +
                                       ": the GPU's bits, not the CPU's"
                          : fast ? exact + ": the exact bits here; a GPU under fastmath approximates" + which +
                                       " (its bits differ)"
                                 : exact + ": CPU and GPU agree bit for bit");
    if (fast) {
      plan.note("approximation", "on a GPU: " + call.def->fast_form);
      plan.note("fastmath", on_gpu ? "on: the GPU runs the approximation"
                                   : "the cpu backend runs the exact function (the exact bits); a GPU the approximation");
    } else if (call.flag("fastmath")) {
      plan.note("fastmath", "nothing to approximate: " + call.op() + " of " + dtype_name(t) + " runs exactly");
    }
    plan.note("ftz", on_gpu ? "the approximation's (see approximation)"
                     : fast ? "no here: subnormals kept (a GPU under fastmath: the approximation's)"
                            : "no: subnormals kept");
    if (call.numerator_part_of_divisor) {
      plan.note("divisor", "the numerator's own sum (exp >= 0): no numerator exceeds it, so a GPU's quotient by its "
                           "reciprocal checks only for a numerator too small");
    }
    if (call.def->nan_rule == NanRule::fmax) {
      plan.note("nan", call.flag("propagate_nan") ? "max.NaN: NaN propagates (like np.maximum)"
                                                  : "fmaxf: a NaN meeting a number yields the number");
    }
    for (int i : call.def->mapped) {  // zero and fill read only src's shape
      const TileRef& ref = call.inputs[i];
      OperandStaging s;
      s.operand = i;
      s.dtype = ref.dtype;
      s.elements = call.output.elements();
      s.kind = ref.scalar ? Staging::scalar : Staging::registers;
      if (!ref.scalar) s.place = place;
      plan.staging.push_back(s);
    }
    OperandStaging out;
    out.dtype = t;
    out.elements = call.output.elements();
    out.load = false;
    out.store = true;
    out.place = place;
    plan.staging.push_back(out);
  }
};

}  // namespace

void register_elementwise_reg(Registry& r) { r.add(std::make_unique<RegElementwise>()); }

}  // namespace tp
