#include "dispatch/registry.h"

#include <algorithm>

#include "dispatch/executor.h"
#include "errors.h"

namespace tp {

namespace {

// Runs an analysing predicate: its reason, or "" with the analysis in `found`; past_limit set
// where the reason is a LimitError.
std::string run_analysis(const Predicate& p, const OpCall& call, const DispatchContext& ctx, Analysis& found,
                         bool& past_limit) {
  try {
    found = p.analyse(call, ctx);
  } catch (const Decline& d) {
    return d.what();
  } catch (const LimitError& e) {
    past_limit = true;
    return e.what();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

Predicate analysing(std::string name, std::function<Analysis(const OpCall&, const DispatchContext&)> analyse) {
  Predicate p{std::move(name), nullptr, false, std::move(analyse)};
  p.check = [analyse = p.analyse](const OpCall& call, const DispatchContext& ctx) {
    Analysis ignored;
    bool past_limit = false;
    return run_analysis(Predicate{"", nullptr, false, analyse}, call, ctx, ignored, past_limit);
  };
  return p;
}

Registry& Registry::instance() {
  static Registry* r = [] {
    auto* reg = new Registry();
    register_builtin_variants(*reg);
    return reg;
  }();
  return *r;
}

void Registry::add(std::unique_ptr<Variant> v) { variants_.push_back(std::move(v)); }

std::vector<const Variant*> Registry::variants_for(const std::string& op) const {
  const OpDef& def = op_def(op);  // unknown op -> ValueError
  std::vector<const Variant*> out;
  for (const auto& v : variants_) {
    if (v->serves(def)) out.push_back(v.get());
  }
  std::sort(out.begin(), out.end(), [](const Variant* a, const Variant* b) {
    return a->priority() != b->priority() ? a->priority() > b->priority() : a->name() < b->name();
  });
  return out;
}

std::shared_ptr<const Plan> Registry::choose(const OpCall& call, const DispatchContext& ctx) const {
  const std::vector<const Variant*> candidates = variants_for(call.op());
  if (!call.dispatch.empty() &&
      std::none_of(candidates.begin(), candidates.end(), [&](const Variant* v) { return v->name() == call.dispatch; })) {
    std::string names;
    for (const Variant* v : candidates) names += (names.empty() ? "" : ", ") + v->name();
    throw ValueError("dispatch: no variant named '" + call.dispatch + "' is registered for " + call.op() +
                     " (its variants: " + names + ")");
  }
  std::vector<TraceEntry> trace;
  for (const Variant* v : candidates) trace.push_back({v->name(), v->priority(), "not tried", {}});
  bool past_limit = false;  // some variant declined for a LimitError

  for (size_t i = 0; i < candidates.size(); ++i) {
    const Variant* v = candidates[i];
    if (!call.dispatch.empty() && v->name() != call.dispatch) continue;
    TraceEntry& entry = trace[i];
    std::vector<std::string> overridden;  // preferences dispatch= overrides: shown on the chosen entry
    Analysis analysis;
    for (const Predicate& p : v->predicates()) {
      const std::string reason = p.analyse ? run_analysis(p, call, ctx, analysis, past_limit) : p.check(call, ctx);
      if (reason.empty()) continue;
      if (!p.preference) {
        entry.reasons.push_back(p.name + ": " + reason);
      } else if (call.dispatch.empty()) {
        entry.reasons.push_back(p.name + " (preference): " + reason);
      } else {
        overridden.push_back(p.name + " (preference, overridden by dispatch=): " + reason);
      }
    }
    if (!ExecutorTable::instance().find(v->name(), ctx.backend)) {
      entry.reasons.push_back("backend: no " + ctx.backend + " executor for " + v->name());
    }
    entry.status = "declined";
    if (!entry.reasons.empty()) continue;
    auto plan = std::make_shared<Plan>();
    plan->variant = v->name();
    plan->priority = v->priority();
    plan->call = call;
    plan->context = ctx;
    plan->analysis = std::move(analysis);
    try {
      v->plan(*plan);
    } catch (const Decline& d) {
      entry.reasons.push_back(std::string("planner: ") + d.what());
      past_limit |= d.past_limit;
      continue;
    }
    plan->analysis.reset();
    entry.status = "chosen";
    entry.reasons = overridden;
    plan->trace = trace;
    return plan;
  }
  throw DispatchError("no variant accepts " + call.str() + "\n" + ctx.str() + "\n" + trace_table(trace), past_limit);
}

}  // namespace tp
