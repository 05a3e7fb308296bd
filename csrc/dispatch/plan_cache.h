// The call-shape cache: a call signature (the call's canonical key and the context's) maps to
// its Plan and, once it first runs, the Runner its backend bound for it. So predicates and the
// planner run once per new signature, and a repeated call is a hash lookup and a run.
#pragma once
#include <memory>
#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>

#include "dispatch/bind_once.h"
#include "dispatch/context.h"
#include "dispatch/executor.h"
#include "dispatch/op_call.h"
#include "dispatch/plan.h"

namespace tp {

class BoundPlan {
 public:
  explicit BoundPlan(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {}
  const Plan& plan() const { return *plan_; }
  const std::shared_ptr<const Plan>& shared_plan() const { return plan_; }
  // The backend's runner for this plan, bound on first use (compiling or loading a kernel);
  // a failed bind is retried by the next call.
  const Runner& runner() const;

 private:
  std::shared_ptr<const Plan> plan_;
  BindOnce<Runner> runner_;
};

class PlanCache {
 public:
  static PlanCache& instance();
  // The bound plan of this call in this context: validated, dispatched and remembered on
  // the first call of its signature.
  std::shared_ptr<const BoundPlan> get(const OpCall& call, const DispatchContext& ctx);
  void clear();
  size_t size() const;

 private:
  static constexpr size_t kMaxEntries = 4096;  // a program of many shapes starts over, not OOM
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const BoundPlan>> entries_;
};

}  // namespace tp
