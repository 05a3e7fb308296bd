// The planner's choice of scope for a program whose scope is named nowhere (DESIGN §2): every
// candidate scope (thread, warp, warpgroup, cta(64) ... cta(1024)) is planned as a named one
// would be, with each staging its plan accepts; a candidate that refuses is recorded with the
// reasons; the survivors are scored by the cost model (scope_cost.h), and the fastest wins, a
// tie (within kScopeTie) going to the smaller scope. The plan keeps every verdict
// (ProgramPlan::scope_trace) beside its staging trace. With no target (the CPU backend) the plan
// models a Hopper GPU (kDefaultTarget), so that a call with no scope plans, and computes, alike on
// the CPU and on that GPU.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tp {

struct ProgramPlan;
struct ProgramSpec;
struct DispatchContext;

inline constexpr const char* kDefaultTarget = "sm_90a";
// A candidate wins over a smaller one only when it is faster by more than this fraction.
inline constexpr double kScopeTie = 0.02;

// One candidate (a scope and a staging) as the plan shows it.
struct ScopeVerdict {
  std::string scope;    // "cta(256)"
  std::string staging;  // the staging scored; empty where the scope refuses
  bool accepted = false;
  bool chosen = false;
  double ns_per_row = 0;
  std::vector<std::string> reasons;  // the refusal, or the cost model's terms
};

std::shared_ptr<const ProgramPlan> plan_auto_scope(const ProgramSpec& spec, const DispatchContext& ctx);

// A standalone call that names no storage, layout or accum, as a program's step whose tiles the
// planner places (spread over the scope's threads in registers, or in shared memory); nothing
// where the call named any of them or the spec is not one call.
std::optional<ProgramSpec> placed_by_planner(const ProgramSpec& at);

}  // namespace tp
