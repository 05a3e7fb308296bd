#include "dispatch/plan_cache.h"

#include "dispatch/registry.h"
#include "dispatch/validate.h"
#include "errors.h"

namespace tp {

const Runner& BoundPlan::runner() const {
  return runner_.get([&] {
    const Executor* e = ExecutorTable::instance().find(plan_->variant, plan_->context.backend);
    if (!e) throw ValueError("backend: no " + plan_->context.backend + " executor for " + plan_->variant);
    return e->bind(*plan_);
  });
}

PlanCache& PlanCache::instance() {
  static PlanCache* cache = new PlanCache();  // outlives every static that might still run plans
  return *cache;
}

std::shared_ptr<const BoundPlan> PlanCache::get(const OpCall& call, const DispatchContext& ctx) {
  std::string signature = call.key() + "\n" + ctx.key();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto hit = entries_.find(signature); hit != entries_.end()) return hit->second;
  }
  OpCall checked = call;
  validate_call(checked, ctx);
  auto bound = std::make_shared<const BoundPlan>(Registry::instance().choose(checked, ctx));
  std::lock_guard<std::mutex> lock(mutex_);
  if (entries_.size() >= kMaxEntries) entries_.clear();
  return entries_.emplace(std::move(signature), bound).first->second;
}

void PlanCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
}

size_t PlanCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace tp
