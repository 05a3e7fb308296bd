// The registry of dispatch variants. A variant is a registration (name, priority, the op family
// it serves, its predicates) and a planner; how a backend runs it lives in csrc/backends.
// Choice: candidates sorted by (-priority, name); every predicate of a candidate is
// evaluated and every failure kept; a candidate without an executor for the context's
// backend declines too; the first candidate whose predicates all pass and whose planner
// accepts wins; dispatch= restricts the choice to one name (and overrides preferences).
#pragma once
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dispatch/context.h"
#include "dispatch/op_call.h"
#include "dispatch/plan.h"

namespace tp {

// A check on a call: returns "" when it holds, else the reason it does not. A preference is
// a predicate that only steers the automatic choice: dispatch= may still force the variant
// (the trace keeps its reason).
using Analysis = std::shared_ptr<const void>;
struct Predicate {
  std::string name;
  std::function<std::string(const OpCall&, const DispatchContext&)> check;
  bool preference = false;
  // Set by analysing(): the variant's analysis, whose result the registry hands to the planner.
  std::function<Analysis(const OpCall&, const DispatchContext&)> analyse;
};

// A predicate that is the variant's analysis of the call: it throws Decline (or ValueError; a
// LimitError for a tile past a limit) for the reason it fails, else returns what it found (null:
// nothing to say), which the registry hands to the planner (Plan::analysis), so one dispatch
// analyses once.
Predicate analysing(std::string name, std::function<Analysis(const OpCall&, const DispatchContext&)> analyse);

// Thrown by a planner that accepts the predicates' verdict but cannot plan the call; past_limit:
// because a tile is past a limit (errors.h: LimitError's meaning).
struct Decline : std::runtime_error {
  explicit Decline(const std::string& what, bool past_limit = false) : std::runtime_error(what), past_limit(past_limit) {}
  bool past_limit = false;
};

class Variant {
 public:
  // Serves every op of `family`, those registered later too (which ops of it a variant takes
  // is a predicate, with its reason).
  Variant(std::string name, int priority, OpFamily family, std::vector<Predicate> predicates)
      : name_(std::move(name)), priority_(priority), family_(family), predicates_(std::move(predicates)) {}
  virtual ~Variant() = default;

  const std::string& name() const { return name_; }
  int priority() const { return priority_; }
  const std::vector<Predicate>& predicates() const { return predicates_; }
  bool serves(const OpDef& op) const { return op.family == family_; }

  // Fills plan.call's output layout and shape, params, numerics, staging and detail; may
  // throw Decline.
  virtual void plan(Plan& plan) const = 0;

 private:
  std::string name_;
  int priority_;
  OpFamily family_;
  std::vector<Predicate> predicates_;
};

class Registry {
 public:
  static Registry& instance();  // holds the built-in variants
  void add(std::unique_ptr<Variant> v);
  std::vector<const Variant*> variants_for(const std::string& op) const;  // in choice order

  // Plans the call; throws DispatchError (the trace table; past_limit where a variant declined for
  // a LimitError) when no variant accepts, and ValueError when dispatch= names no variant of the op.
  std::shared_ptr<const Plan> choose(const OpCall& call, const DispatchContext& ctx) const;

 private:
  std::vector<std::unique_ptr<Variant>> variants_;
};

// Registers tileprim's own variants (variants/*); called once by Registry::instance().
void register_builtin_variants(Registry& r);

}  // namespace tp
