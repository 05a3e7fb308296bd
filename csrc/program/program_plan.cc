#include "program/program_plan.h"

#include <algorithm>
#include <exception>
#include <numeric>

#include "dispatch/validate.h"
#include "errors.h"
#include "layout/placement.h"

namespace tp {

namespace {

long long product(const std::vector<long long>& shape) {
  long long n = 1;
  for (long long d : shape) n *= d;
  return n;
}

TileLayout layout_of(const std::optional<TileLayout>& layout, const std::vector<long long>& shape) {
  return layout.value_or(TileLayout::row_major(shape));
}

std::string placement_of(Storage storage, const TileLayout& layout) {
  return std::string(storage_name(storage)) + " " + layout.str();
}

// An error's prefix naming the step by the user's line and op; none for a standalone call's step
// (no line), whose errors read as the call's own
std::string at_step(const StepSpec& s) { return s.where.empty() ? "" : s.where + ": " + s.op + ": "; }

// One way to place a step: its storage, its operands' layout and its result's layout.
struct Placement {
  Storage storage = Storage::local;
  std::optional<TileLayout> layout, out_layout;
  std::string why;
  bool x_global = false;  // a take reads x, a program input, where it lies in global memory
  bool picks_held = false;  // a scatter's idx and src in registers, every thread holding each
};

// The program's planner at work: values, steps, and the copies it adds.
class ProgramPlanner {
 public:
  ProgramPlanner(const ProgramSpec& spec, const DispatchContext& ctx) : spec_(spec) {
    plan_ = std::make_shared<ProgramPlan>();
    plan_->name = spec.name;
    plan_->scope = spec.scope;
    plan_->context = ctx;
    for (size_t i = 0; i < spec.inputs.size(); ++i) {
      const ProgramInput& in = spec.inputs[i];
      ProgramValue v;
      v.name = in.name;
      v.dtype = in.dtype;
      v.shape = in.shape;
      v.input = static_cast<int>(i);
      v.batch_broadcast = in.batch_broadcast;
      plan_->values.push_back(v);
      ids_.push_back(static_cast<int>(i));
    }
  }

  std::shared_ptr<const ProgramPlan> run() {
    for (const StepSpec& s : spec_.steps) {
      const bool part = divides_part_by_its_sum(s);
      StepSpec planned = s;  // operands as plan value ids: inserted copies shift the traced ids
      for (int& id : planned.operands) {
        if (id >= static_cast<int>(ids_.size())) {
          throw ValueError(at_step(s) + "an operand is not yet made");
        }
        if (id >= 0) id = ids_[id];
      }
      ids_.push_back(plan_step(planned, part));
    }
    if (spec_.outputs.empty()) throw ValueError(spec_.name + ": the program returns no tile");
    for (int id : spec_.outputs) {
      plan_->outputs.push_back(ids_.at(id));
      place_unread_input(plan_->outputs.back());
    }
    plan_->scalar_args = spec_.scalar_args;
    mark_accumulated();
    size_shared_memory(*plan_);
    mark_syncs(*plan_);
    choose_staging(*plan_, spec_.staging);
    return plan_;
  }

 private:
  ProgramValue& value(int id) { return plan_->values.at(static_cast<size_t>(id)); }
  const ProgramValue& value(int id) const { return plan_->values.at(static_cast<size_t>(id)); }

  // Whether traced step s is fdiv(e, sum(e)) for a tile e of exp or exp2 (a softmax), the sum keeping
  // its dims or reducing all of them, so that each element meets the sum of a group that holds it.
  // Every e >= 0 (or NaN), and a sum of values >= 0 rounded to nearest in any order is at least
  // each of them: no numerator exceeds its divisor, wherever that divisor is finite.
  bool divides_part_by_its_sum(const StepSpec& s) const {
    const int inputs = static_cast<int>(spec_.inputs.size());
    if (s.op != "fdiv" || s.call || s.operands.size() != 2 || s.operands[0] < inputs || s.operands[1] < inputs) {
      return false;
    }
    const StepSpec& part = spec_.steps.at(static_cast<size_t>(s.operands[0] - inputs));
    const StepSpec& sum = spec_.steps.at(static_cast<size_t>(s.operands[1] - inputs));
    const bool one_value = value(ids_.at(static_cast<size_t>(s.operands[1]))).elements() == 1;
    return (part.op == "exp" || part.op == "exp2") && !part.call && sum.op == "sum" && !sum.call &&
           sum.operands.size() == 1 && sum.operands[0] == s.operands[0] && (sum.keepdims || one_value);
  }

  int plan_step(const StepSpec& s, bool numerator_part_of_divisor = false) {
    if (s.call) return plan_as_called(s);
    const OpDef& def = op_def(s.op);
    const ExecScope& scope = spec_.scope;
    std::vector<std::vector<long long>> shapes;
    for (int id : s.operands) {
      if (id >= 0) shapes.push_back(value(id).shape);
    }
    if (shapes.empty()) throw ValueError(at_step(s) + "at least one operand must be a tile");
    const bool reduction = def.family == OpFamily::reduction;
    // a gather's operands keep their own shapes (copy's too: it broadcasts its source itself)
    const bool own_shapes = s.op == "copy" || def.family == OpFamily::gather;
    std::vector<int> axes = s.axes;
    // the shape each operand takes in the step, and the result's
    const std::vector<long long> in_shape =
        reduction || own_shapes ? shapes[0] : broadcast_shapes(shapes, s.where, s.op);
    std::vector<long long> out_shape = reduction ? reduced_shape(in_shape, axes, s.keepdims, s.where) : in_shape;
    if (out_shape.empty()) out_shape = {1};  // every dim reduced: a tile has at least one dim
    if (def.family == OpFamily::gather) {
      try {
        out_shape = gather_result_shape(def, shapes, axes);
      } catch (const ValueError& e) {
        throw ValueError(at_step(s) + e.what());
      }
    }
    std::vector<long long> core_out = out_shape;  // the standalone call's: the dims not reduced
    if (reduction) {
      core_out.clear();
      for (int d = 0; d < static_cast<int>(in_shape.size()); ++d) {
        if (std::find(axes.begin(), axes.end(), d) == axes.end()) core_out.push_back(in_shape[d]);
      }
    }

    ProgramValue result;
    result.name = s.name;
    if (result.name.empty()) {  // unnamed in the user's code: the call itself, e.g. sum(e)
      std::string args;
      for (int id : s.operands) args += (args.empty() ? "" : ", ") + (id < 0 ? std::string("k") : value(id).name);
      result.name = s.op + "(" + args + ")";
    }
    const ProgramValue& first =
        value(*std::find_if(s.operands.begin(), s.operands.end(), [](int id) { return id >= 0; }));
    result.dtype = s.dtype.empty() ? first.dtype : dtype_from_name(s.dtype, "dtype");
    result.shape = out_shape;

    std::vector<std::string> errors;  // each placement's refusal, once
    std::exception_ptr first_error;
    bool limit = false;  // a placement was refused for a tile past a limit
    for (const Placement& p : placements(s, def, in_shape, out_shape)) {
      OpCall call;
      call.def = &def;
      call.scope = scope;
      call.axes = s.axes;
      call.config = s.config;
      if (spec_.fastmath && def.has_option("fastmath")) call.config.emplace("fastmath", true);  // unless the step says
      call.dispatch = s.dispatch;
      call.numerator_part_of_divisor = numerator_part_of_divisor;
      for (size_t i = 0; i < s.operands.size(); ++i) {
        const std::string arg = def.operands.at(i);
        if (s.operands[i] < 0) {
          TileRef t;
          t.arg = arg;
          t.scalar = true;
          call.inputs.push_back(t);
          continue;
        }
        TileRef t;
        t.arg = arg;
        t.dtype = value(s.operands[i]).dtype;
        t.shape = own_shapes ? value(s.operands[i]).shape : in_shape;
        // a copy reads its source where it is, as a gather op its x (take: in registers or shared
        // memory; scatter reads only its shape); other steps read where their variant wants
        const bool copy = s.op == "copy" || (def.family == OpFamily::gather && i == 0);
        const ProgramValue& src = value(s.operands[i]);
        t.storage = copy && src.layout ? src.storage : p.storage;
        t.layout = copy && src.layout ? src.layout
                                      : (def.family == OpFamily::gather && !p.x_global && !p.picks_held
                                             ? std::nullopt
                                             : p.layout);
        if (copy && !src.layout) t.layout = spread_or_none(src.shape, p.storage);
        if (p.x_global && i == 0) {
          t.storage = Storage::global;
          t.layout.reset();
        }
        call.inputs.push_back(t);
      }
      call.output.arg = "out";
      call.output.dtype = result.dtype;
      call.output.storage = p.storage;
      call.output.layout = p.out_layout;
      call.output.shape = core_out;
      if (s.op == "scatter_add_along_axis" && s.storage.empty()) {  // x's shape, spread as maps take it
        call.output.storage = Storage::local;
        call.output.layout = spread_or_none(out_shape, Storage::local);
      }
      std::shared_ptr<const BoundPlan> bound;
      try {
        bound = PlanCache::instance().get(call, plan_->context);
      } catch (const ValueError& e) {  // DispatchError and LimitError too
        if (std::find(errors.begin(), errors.end(), e.what()) == errors.end()) errors.push_back(e.what());
        if (!first_error) first_error = std::current_exception();
        limit |= past_limit(e);
        continue;
      } catch (const TypeError& e) {  // an option or dtype the op does not take: no placement helps
        throw TypeError(at_step(s) + e.what());
      }
      return add_step(s, bound, result, p.why);
    }
    // a standalone call's step (no source line) that every placement refused alike: the call's own
    // error (an axis, a variant's name), as the call at a named scope raises it
    if (s.where.empty() && errors.size() == 1 && !limit) std::rethrow_exception(first_error);
    std::string listed;
    for (const std::string& e : errors) listed += (listed.empty() ? "" : "\n") + e;
    throw DispatchError((s.where.empty() ? "" : s.where + ": ") + s.op + " of " + first.name + " " +
                        shape_str(in_shape) + ": no placement is accepted at scope " + scope.str() + ":\n" + listed +
                        (limit ? "\nFix: a scope with more threads (each thread of tp.cta(n) holds 1/n of a tile, "
                                 "of tp.cluster(k, n) 1/(k n)), no scope named (the planner's choice holds a row of "
                                 "any length, in passes where registers cannot), a smaller tile (more batch_dims), or "
                                 "storage='shared' for the steps that take it"
                               : ""),
                        limit);
  }

  // A step made as called: its call planned as it is, so it declines or errs as the standalone
  // call does, with no placement of the planner's.
  int plan_as_called(const StepSpec& s) {
    const std::shared_ptr<const BoundPlan> bound = PlanCache::instance().get(*s.call, plan_->context);
    const TileRef& out = bound->plan().call.output;
    ProgramValue result;
    result.name = s.name.empty() ? out.arg : s.name;
    result.dtype = out.dtype;
    result.shape = out.shape;
    return add_step(s, bound, result, "");
  }

  // A step that folds into its result's old value (accum) writes an output the caller holds.
  void mark_accumulated() {
    for (const ProgramStep& step : plan_->steps) {
      if (!step.bound->plan().call.accum) continue;
      if (std::count(plan_->outputs.begin(), plan_->outputs.end(), step.result) != 1) {
        throw ValueError("accum: " + value(step.result).name + " folds into its old value, so it must be returned "
                         "once (into out=)");
      }
      value(step.result).accumulated = true;
    }
  }

  std::optional<TileLayout> spread_or_none(const std::vector<long long>& shape, Storage storage) const {
    return storage == Storage::local ? spread_layout(shape, spec_.scope) : std::nullopt;
  }

  // Where a step may be placed, in the order tried. A step that names its storage or layout
  // gets exactly that; otherwise the program's storage first (if it has one), then registers
  // spread over the scope's threads for maps, and for reductions the storage each reduction
  // variant works in. A copy's placement is its result's; it reads its source where it is.
  std::vector<Placement> placements(const StepSpec& s, const OpDef& def, const std::vector<long long>& in_shape,
                                    const std::vector<long long>& out_shape) const {
    const ExecScope& scope = spec_.scope;
    const bool reduction = def.family == OpFamily::reduction;
    auto given = [&](const std::string& storage, const std::string& whose) {
      Placement p;
      const std::optional<TileLayout>& layout = s.layout;
      p.storage = !storage.empty() ? storage_from_name(storage)
                  : (layout && layout->has_thread_axes()) || scope.kind != ScopeKind::cta ? Storage::local
                                                                                         : Storage::shared;
      p.layout = s.layout;
      p.out_layout = s.out_layout;
      const std::vector<long long>& shape = s.op == "copy" || !reduction ? out_shape : in_shape;
      p.why = "storage " + std::string(storage_name(p.storage)) + whose;
      if (!p.layout && p.storage == Storage::local && !reduction) {
        p.layout = spread_layout(shape, scope);
        if (p.layout) p.why += "; layout " + p.layout->str() + ": the planner's, " + spread_why(shape);
      }
      if (s.op == "copy") {  // layout= names the copy's result
        p.out_layout = p.layout;
        p.layout.reset();
        if (!p.out_layout) p.out_layout = TileLayout::row_major(out_shape);
      }
      return p;
    };
    if (def.family == OpFamily::gather && s.storage.empty()) {
      std::vector<Placement> out;
      const ProgramValue& x = value(s.operands.at(0));
      const std::optional<TileLayout> held = spread_layout(out_shape, scope);
      if (s.op == "take_along_axis" && x.input >= 0 && product(out_shape) == 1 && held) {  // one pick: held by all
        Placement p;
        p.x_global = true;
        p.storage = Storage::local;
        p.layout = p.out_layout = held;
        p.why = "x, a program input, read where it lies in global memory (one element per pick, the row never "
                "staged); idx and the picked values in registers, " + held->str() + ": every thread of " +
                scope.str() + " holds each";
        out.push_back(p);
      }
      const std::vector<long long>& idx_shape = value(s.operands.at(1)).shape;
      const std::optional<TileLayout> one = spread_layout(idx_shape, scope);
      if (s.op == "scatter_add_along_axis" && product(idx_shape) == 1 && one) {  // one value per row: held by all
        Placement p;
        p.picks_held = true;
        p.storage = Storage::local;
        p.layout = one;
        p.why = "idx and src in registers, " + one->str() + ": every thread of " + scope.str() +
                " holds each; the result in registers, spread as maps take it";
        out.push_back(p);
      }
      Placement p;
      p.storage = Storage::shared;
      p.why = s.op == "take_along_axis"
                  ? "x where it lies; idx and the picked values in shared memory, where every thread of " + scope.str() +
                        " reads them"
                  : "idx and src in shared memory, where every thread of " + scope.str() +
                        " reads them; the result in registers, spread as maps take it";
      out.push_back(p);
      return out;
    }
    if (!s.storage.empty() || s.layout || s.out_layout || s.op == "copy") {
      return {given(s.storage, s.storage.empty() ? (s.op == "copy" ? " (the planner's: maps read registers)" : "")
                                                 : " (given)")};
    }
    std::vector<Placement> out;
    if (!spec_.storage.empty()) out.push_back(given(spec_.storage, " (the program's storage=)"));
    auto spread = [&](const std::vector<long long>& shape, const std::string& what) {
      Placement p;
      p.storage = Storage::local;
      p.layout = spread_layout(shape, scope);
      p.why = p.layout ? "registers, layout " + p.layout->str() + ": the planner's, " + spread_why(shape) + what
                       : "registers: one thread holds the whole tile" + what;
      return p;
    };
    if (!reduction) {
      // where an operand of the result's shape already lies in registers: there, with no copy
      for (int id : s.operands) {
        if (id < 0) continue;
        const ProgramValue& v = value(id);
        if (!v.layout || v.storage != Storage::local || v.shape != out_shape) continue;
        Placement p;
        p.storage = Storage::local;
        p.layout = v.layout;
        p.why = "registers, layout " + v.layout->str() + ": " + v.name + "'s, so that it needs no copy; maps run in registers";
        out.push_back(p);
        break;
      }
      out.push_back(spread(out_shape, "; maps run in registers"));
      return out;
    }
    Placement shared;
    shared.storage = Storage::shared;
    shared.why = "shared memory, row-major: the " + scope.str() + " folds it there (in registers it is declined, "
                 "see the local variants' reasons)";
    out.push_back(spread(in_shape, scope.kind == ScopeKind::cluster
                                       ? "; folded in registers, across warps through shared memory, across CTAs "
                                         "through the cluster's distributed shared memory"
                                   : scope.threads > 32 ? "; folded in registers, across warps through shared memory"
                                                        : "; folded in registers"));
    out.push_back(shared);
    return out;
  }

  std::string spread_why(const std::vector<long long>& shape) const {
    const long long n = product(shape), t = spec_.scope.threads;
    const std::string over = std::to_string(n) + " elements over the " + std::to_string(t) + " threads of " +
                             spec_.scope.str();
    if (n % t == 0) return over + " (" + std::to_string(n / t) + " per thread)";
    const std::optional<TileLayout> layout = spread_layout(shape, spec_.scope);
    if (layout && layout->padded()) {
      const long long slots = layout->size() / t;
      return over + ", padded: " + std::to_string(slots) + " slots per thread, the " +
             std::to_string(layout->size() - n) + " past its end holding nothing";
    }
    return "one value, a copy in each of the " + std::to_string(t) + " threads of " + spec_.scope.str();
  }

  // An input not yet read is staged where its reader wants it; a result read elsewhere than
  // where it was written gets a copy step first.
  int operand_for(int id, const TileRef& want, const std::string& op, const std::string& where,
                  const std::string& who) {
    if (want.storage == Storage::global) return id;  // a program input where it lies: nothing to stage
    ProgramValue& v = value(id);
    const TileLayout want_layout = layout_of(want.layout, want.shape);
    if (!v.layout && want.shape == v.shape) {  // an input staged once, where it is first read
      v.storage = want.storage;
      v.layout = want_layout;
      return id;
    }
    if (!v.layout) place_unread_input(id);
    if (v.storage == want.storage && v.shape == want.shape && *v.layout == want_layout) return id;
    // a copy step, planned like any other
    OpCall call;
    call.def = &op_def("copy");
    call.scope = spec_.scope;
    TileRef src;
    src.arg = "src";
    src.dtype = v.dtype;
    src.shape = v.shape;
    src.storage = v.storage;
    src.layout = v.layout;
    call.inputs.push_back(src);
    call.output = want;
    call.output.arg = "out";
    call.output.layout = want_layout;
    std::shared_ptr<const BoundPlan> bound;
    try {
      bound = PlanCache::instance().get(call, plan_->context);
    } catch (const ValueError& e) {
      throw DispatchError(where + ": the copy of " + v.name + " that " + op + " needs cannot be planned:\n" + e.what(),
                          past_limit(e));
    }
    ProgramValue copied;
    copied.name = v.name + "'";
    copied.dtype = v.dtype;
    copied.shape = want.shape;
    const std::string reason = op + " needs " + who + " in " + placement_of(want.storage, want_layout) + "; " +
                               v.name + " is " + describe(v) +
                               (want.shape != v.shape ? ", broadcast from " + shape_str(v.shape) + " to " +
                                                            shape_str(want.shape)
                                                      : "");
    ProgramStep step;
    step.op = "copy";
    step.bound = bound;
    step.operands = {id};
    step.scalars = {0.0};
    step.scalar_args = {-1};
    step.where = where;
    step.inserted = true;
    step.reasons = {reason};
    return push(step, copied, bound->plan().call.output);
  }

  std::string describe(const ProgramValue& v) const {
    if (is_shared(v.storage)) {
      return (product(v.shape) == 1 ? "one value per instance" : "a " + shape_str(v.shape) + " tile") +
             std::string(" in shared memory (") + v.layout->str() + ")";
    }
    return "in registers as " + v.layout->str();
  }

  int push(ProgramStep& step, ProgramValue result, const TileRef& placed) {
    result.storage = placed.storage;
    result.layout = layout_of(placed.layout, placed.shape);
    result.written = static_cast<int>(plan_->steps.size());
    for (int id : step.operands) {
      if (id >= 0) value(id).last_read = result.written;
    }
    step.result = static_cast<int>(plan_->values.size());
    plan_->values.push_back(result);
    plan_->steps.push_back(step);
    return step.result;
  }

  int add_step(const StepSpec& s, const std::shared_ptr<const BoundPlan>& bound, const ProgramValue& result,
                const std::string& why) {
    const Plan& plan = bound->plan();
    ProgramStep step;
    step.op = s.op;
    step.bound = bound;
    step.scalars = s.scalars;
    step.scalar_args = s.scalar_args;
    step.scalar_args.resize(s.operands.size(), -1);
    step.where = s.where;
    if (!why.empty()) step.reasons.push_back(why);
    std::vector<std::string> names;
    for (int id : s.operands) {
      if (id >= 0) names.push_back(value(id).name);
    }
    std::string who;
    for (size_t i = 0; i < names.size(); ++i) who += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
    for (size_t i = 0; i < s.operands.size(); ++i) {
      const int id = s.operands[i];
      step.operands.push_back(id < 0 ? -1 : operand_for(id, plan.call.inputs[i], s.op, s.where, who));
    }
    return push(step, result, plan.call.output);
  }

  // An input nobody read yet (or one returned as it is): staged in the scope's default storage.
  void place_unread_input(int id) {
    ProgramValue& v = value(id);
    if (v.layout) return;
    v.storage = spec_.scope.kind == ScopeKind::cta ? Storage::shared : Storage::local;
    v.layout = TileLayout::row_major(v.shape);
  }

  const ProgramSpec& spec_;
  std::shared_ptr<ProgramPlan> plan_;
  std::vector<int> ids_;  // traced value id -> plan value id
};

}  // namespace

std::shared_ptr<const ProgramPlan> plan_at_scope(const ProgramSpec& spec, const DispatchContext& ctx) {
  const ProgramSpec rewritten = steps_before_casts(spec, true), plain = steps_before_casts(spec, false);
  const auto same_step = [](const StepSpec& a, const StepSpec& b) { return a.op == b.op && a.operands == b.operands; };
  if (std::equal(rewritten.steps.begin(), rewritten.steps.end(), plain.steps.begin(), plain.steps.end(), same_step)) {
    return ProgramPlanner(plain, ctx).run();
  }
  // A max reduced in 16 bits keeps the 16-bit row live beside its wider copy up to the max's step:
  // where that takes the tiles past a thread's registers (two copies that filled them exactly),
  // the wider copy's max, the same values, keeps them within, whatever the staging. The 16-bit row
  // takes at most the widest tile's registers, so a plan past the budget by more than that has a
  // plain program past it too, and is not planned again.
  const auto fits = [](const ProgramPlan& p) { return p.peak_registers <= p.register_budget(); };
  std::shared_ptr<const ProgramPlan> planned;
  try {
    planned = ProgramPlanner(rewritten, ctx).run();
  } catch (const DispatchError&) {  // a named staging declined: the plain program may hold it
  }
  if (planned && (fits(*planned) || planned->peak_registers - planned->widest_thread_slots > planned->register_budget())) {
    return planned;
  }
  std::shared_ptr<const ProgramPlan> kept = ProgramPlanner(plain, ctx).run();
  return !planned || fits(*kept) ? kept : planned;
}

std::shared_ptr<const ProgramPlan> plan_program(const ProgramSpec& spec, const DispatchContext& ctx) {
  if (spec.auto_scope) return plan_auto_scope(spec, ctx);
  if (spec.scope.kind == ScopeKind::cluster) {  // a call's tiles, spread over the cluster's lanes
    if (const std::optional<ProgramSpec> placed = placed_by_planner(spec)) return plan_at_scope(*placed, ctx);
  }
  return plan_at_scope(spec, ctx);
}

std::shared_ptr<const ProgramPlan> with_folded_outputs(const ProgramPlan& plan, long long tiles,
                                                       const std::vector<int>& folded) {
  if (tiles < 1) throw ValueError("folded_tiles: " + std::to_string(tiles) + " must be at least 1");
  auto made = std::make_shared<ProgramPlan>(plan);
  for (int j : folded) {
    if (j < 0 || j >= static_cast<int>(plan.outputs.size())) {
      throw ValueError("folded: output " + std::to_string(j) + " of " + std::to_string(plan.outputs.size()));
    }
    const DType t = plan.values.at(plan.outputs[j]).dtype;
    if (t == DType::int32 || t == DType::int64) {
      throw TypeError("folded: output " + std::to_string(j) + " is " + dtype_name(t) + "; a folded output is a float");
    }
    if (std::find(made->folded.begin(), made->folded.end(), j) == made->folded.end()) made->folded.push_back(j);
  }
  made->folded_tiles = tiles;
  return made;
}

}  // namespace tp
