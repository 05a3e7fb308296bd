// Plan: the outcome of dispatch for one call: the chosen variant, its parameters and
// numerics, and the trace of every registered variant (chosen / declined / not tried, with
// every failing predicate's reason).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "dispatch/context.h"
#include "dispatch/op_call.h"

namespace tp {

class Variant;

using ParamValue = std::variant<bool, long long, double, std::string, std::vector<long long>>;

struct TraceEntry {
  std::string variant;
  int priority = 0;
  std::string status;  // "chosen", "declined", "not tried"
  std::vector<std::string> reasons;
};

// What a variant's planner hands to its own runners (tables, views); opaque elsewhere.
struct VariantPlan {
  virtual ~VariantPlan() = default;
};

struct Plan {
  std::string variant;
  int priority = 0;
  const Variant* impl = nullptr;
  OpCall call;  // as resolved by the planner: the output's layout is always set
  DispatchContext context;
  std::vector<std::pair<std::string, ParamValue>> params;
  std::vector<std::pair<std::string, std::string>> numerics;
  std::vector<TraceEntry> trace;
  std::shared_ptr<const VariantPlan> detail;

  void set(const std::string& key, ParamValue value);
  void note(const std::string& key, const std::string& value);  // a numerics entry
  const ParamValue& param(const std::string& key) const;       // ValueError if absent
  template <class D> const D& detail_as() const { return static_cast<const D&>(*detail); }

  std::string str() const;  // the call, the trace table, then params and numerics
};

std::string param_str(const ParamValue& v);
// The trace as a table: one row per variant, reasons joined with "; ".
std::string trace_table(const std::vector<TraceEntry>& trace);

}  // namespace tp
