#include "program/auto_scope.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <sstream>

#include "dispatch/architecture.h"
#include "errors.h"
#include "program/program_plan.h"
#include "program/scope_cost.h"

namespace tp {

namespace {

// Smallest first: a tie goes to the earlier.
const std::vector<ExecScope>& candidates() {
  static const std::vector<ExecScope> scopes = {ExecScope::thread(), ExecScope::warp(),    ExecScope::cta(64),
                                                ExecScope::warpgroup(), ExecScope::cta(128), ExecScope::cta(256),
                                                ExecScope::cta(512), ExecScope::cta(1024)};
  return scopes;
}

// Past one CTA (targets with clusters): planned only where no CTA candidate holds the rows on chip;
// clusters of 16 CTAs where the target runs that non-portable size (a row of 262144 in registers).
std::vector<ExecScope> cluster_candidates(const SmLimits& limits) {
  std::vector<ExecScope> scopes;
  for (int ctas = 2; ctas <= limits.cluster_ctas_nonportable; ctas *= 2) {
    for (int threads : {256, 512}) scopes.push_back(ExecScope::cluster(ctas, threads));
  }
  return scopes;
}

// Whether the chosen staging holds the rows on chip (no pass re-reads them from memory).
bool on_chip(const std::string& staging) { return staging == "registers" || staging == "shared"; }

// The spec at `scope`: a standalone call's step is called there, its tiles staged where the scope
// stages them by default unless the call named a storage.
ProgramSpec rescoped(const ProgramSpec& spec, const ExecScope& scope) {
  ProgramSpec at = spec;
  at.scope = scope;
  at.auto_scope = false;
  const Storage storage = scope.kind == ScopeKind::cta ? Storage::shared : Storage::local;
  for (StepSpec& s : at.steps) {
    if (!s.call) continue;
    s.call->scope = scope;
    if (s.storage_given) continue;
    for (TileRef& t : s.call->inputs) {
      if (!t.scalar) t.storage = storage;
    }
    s.call->output.storage = storage;
  }
  return at;
}

}  // namespace

// Where the scope's default storage refuses a call's tiles (a row past a thread's registers or a
// block's shared memory), and at a cluster (whose tiles live in registers, spread over its lanes).
std::optional<ProgramSpec> placed_by_planner(const ProgramSpec& at) {
  if (at.steps.size() != 1 || !at.steps.front().call || at.steps.front().storage_given) return std::nullopt;
  ProgramSpec placed = at;
  StepSpec& s = placed.steps.front();
  const OpCall& call = *s.call;
  if (call.accum || call.output.layout) return std::nullopt;
  for (const TileRef& t : call.inputs) {
    if (t.layout) return std::nullopt;
  }
  s.axes = call.axes;
  s.config = call.config;
  s.dispatch = call.dispatch;
  if (call.def->extra_arg == "dtype") s.dtype = dtype_name(call.output.dtype);
  s.call.reset();
  return placed;
}

namespace {

// Rows past one chunk of cta(1024) (16 slots a thread: the kernel frame's chunk): below, a CTA holds
// a row on chip near copy speed (the H200 points of RMSNorm and add+RMSNorm at 16384: 4.0-4.1 TB/s).
constexpr long long kClusterRowsFrom = 16 * 1024;

long long longest_input(const ProgramPlan& plan) {
  long long n = 0;
  for (const ProgramValue& v : plan.values) {
    if (v.input >= 0) n = std::max(n, v.elements());
  }
  return n;
}

// A refusal's first lines: the plan's error names the step and the rule; the whole trace is what
// naming the scope shows.
std::vector<std::string> refusal(const std::string& what) {
  std::vector<std::string> lines;
  std::istringstream in(what);
  for (std::string line; std::getline(in, line) && lines.size() < 3;) {
    // the scope is the verdict's, the fix is for a named scope: the reasons alone
    if (line.find("no placement is accepted at scope") != std::string::npos || line.rfind("Fix:", 0) == 0) continue;
    lines.push_back(line.rfind(": ", 0) == 0 ? line.substr(2) : line);
  }
  return lines;
}

std::string ns(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f ns per row", v);
  return buf;
}

}  // namespace

std::shared_ptr<const ProgramPlan> plan_auto_scope(const ProgramSpec& spec, const DispatchContext& given) {
  DispatchContext ctx = given;
  if (ctx.target.empty()) {  // the CPU backend models a Hopper GPU: the same plan, the same bits
    ctx.target = kDefaultTarget;
    ctx.sm_version = sm_version(ctx.target);
  }
  std::vector<ScopeVerdict> trace;
  std::shared_ptr<ProgramPlan> best;
  size_t best_at = 0;
  bool in_registers = false;  // some candidate holds the rows in registers, more than one instance per SM
  bool limit = false;
  std::exception_ptr first_refusal;  // rethrown where every scope refused alike (an argument's error)
  std::exception_ptr first_plain;    // the first refusal not past a limit, and where those refusals are
  std::vector<size_t> plain_at;
  auto consider = [&](const ExecScope& scope) {
    std::shared_ptr<const ProgramPlan> plan;
    const ProgramSpec at = rescoped(spec, scope);
    // a standalone call naming no storage, layout or accum is a program's step (DESIGN §2): its tiles
    // placed by the planner (spread over the scope's threads), as the cost model scores them, not the
    // scope's default view (at warp scope: the whole row on every lane); as called where that refuses
    const std::optional<ProgramSpec> placed = placed_by_planner(at);
    try {
      plan = plan_at_scope(placed ? *placed : at, ctx);
    } catch (const ValueError& refused) {  // DispatchError and LimitError too: as called, or the next scope
      // where both refuse, the planner's own placement says why (the registers it needed), not the
      // call as called (its table of variants, each refusing the scope's default view)
      const std::string why = refused.what();
      try {
        if (!placed) throw;
        plan = plan_at_scope(at, ctx);
      } catch (const ValueError& e) {
        ScopeVerdict v;
        v.scope = scope.str();
        v.reasons = refusal(placed ? why : e.what());
        limit |= past_limit(e);
        trace.push_back(v);
        if (!first_refusal) first_refusal = std::current_exception();
        if (!past_limit(e) && !past_limit(refused)) {
          if (!first_plain) first_plain = std::current_exception();
          plain_at.push_back(trace.size() - 1);
        }
        return;
      }
    }
    for (const StagingVerdict& staging : plan->staging_trace) {
      if (!staging.accepted || (!spec.staging.empty() && staging.name != spec.staging)) continue;
      auto candidate = std::make_shared<ProgramPlan>(*plan);
      if (staging.name != plan->staging) switch_staging(*candidate, staging.name);
      const ScopeCost cost = estimate_cost(*candidate);
      ScopeVerdict v;
      v.scope = scope.str();
      v.staging = staging.name;
      v.accepted = true;
      v.ns_per_row = cost.ns_per_row;
      in_registers |= staging.name == "registers" && cost.instances_per_sm > 1;
      v.reasons = cost.terms;
      if (!best || cost.ns_per_row < trace[best_at].ns_per_row * (1 - kScopeTie)) {
        best = candidate;
        best_at = trace.size();
      }
      trace.push_back(v);
    }
  };
  const std::vector<ExecScope> clusters = cluster_candidates(target_limits(ctx.target));
  if (!spec.auto_scope_only.empty()) {
    for (const std::vector<ExecScope>* scopes : {&candidates(), &clusters}) {
      for (const ExecScope& scope : *scopes) {
        if (scope.str() == spec.auto_scope_only) consider(scope);
      }
    }
  } else {
    for (const ExecScope& scope : candidates()) consider(scope);
    // the rows fit no CTA's shared memory, or (past one chunk of cta(1024)) no CTA's registers with
    // another instance beside it on the SM (a CTA alone there takes a row at a time): a cluster may
    // hold them, a share on each SM (so the choice for shorter rows is the CTAs' alone)
    if (!best || !on_chip(best->staging) || (!in_registers && longest_input(*best) > kClusterRowsFrom)) {
      for (const ExecScope& scope : clusters) consider(scope);
    }
  }
  if (!best) {
    // a refusal every scope gives is no scope's: the call's own error (an axis out of range, a
    // zero-size tile), raised as it is (a cluster may add its own reasons beside it)
    const bool alike = !trace.front().reasons.empty() &&
                       std::all_of(trace.begin(), trace.end(), [&](const ScopeVerdict& v) {
                         return std::find(v.reasons.begin(), v.reasons.end(), trace.front().reasons.front()) !=
                                v.reasons.end();
                       });
    if (alike && first_refusal) std::rethrow_exception(first_refusal);
    // nor is one every scope the tiles fit refused alike: the call's error where the others were past a limit
    if (first_plain && std::all_of(plain_at.begin(), plain_at.end(), [&](size_t k) {
          return trace[k].reasons == trace[plain_at.front()].reasons;
        })) {
      std::rethrow_exception(first_plain);
    }
    std::string reasons;
    for (const ScopeVerdict& v : trace) {
      reasons += "\n  " + v.scope + ":";
      for (const std::string& r : v.reasons) reasons += " " + r;
    }
    // a tile of several dims is padded flat over the threads, which its reductions group into dims only
    // where the padding is whole dim-0 slices: rows of it reduced along the last axis are a batch of rows
    const bool several_dims = std::any_of(spec.inputs.begin(), spec.inputs.end(),
                                          [](const ProgramInput& in) { return in.shape.size() > 1; });
    throw DispatchError(spec.name + ": no scope holds its tiles (the scope is named nowhere, so every candidate was "
                        "planned):" + reasons +
                            (several_dims && limit
                                 ? "\nFix: where its reductions run along the last axis, pass a tile's leading dims as "
                                   "batch dims (batch_dims=k+1): rows of any length plan at some scope"
                                 : ""),
                        limit);
  }
  trace[best_at].chosen = true;
  trace[best_at].reasons.insert(trace[best_at].reasons.begin(),
                                "chosen: the least estimated time, " + ns(trace[best_at].ns_per_row) +
                                    " (a larger scope must be faster by more than " +
                                    std::to_string(static_cast<int>(kScopeTie * 100)) + " %)");
  best->scope_trace = std::move(trace);
  return best;
}

}  // namespace tp
