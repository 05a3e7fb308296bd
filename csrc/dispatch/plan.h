// Plan: the outcome of dispatch for one call, immutable once made: the chosen variant, its
// parameters and numerics, how each operand is staged for the tile frame, the variant's own
// descriptors (detail), and the trace of every registered variant (chosen / declined / not
// tried, with every failing predicate's reason). Backends read plans; they never change them.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "dispatch/context.h"
#include "dispatch/op_call.h"
#include "layout/placement.h"

namespace tp {

using ParamValue = std::variant<bool, long long, double, std::string, std::vector<long long>>;
std::string param_str(const ParamValue& v);

struct TraceEntry {
  std::string variant;
  int priority = 0;
  std::string status;  // "chosen", "declined", "not tried"
  std::vector<std::string> reasons;
};
// The trace as a table: one row per variant, reasons joined with "; ".
std::string trace_table(const std::vector<TraceEntry>& trace);

// Where one operand of a tile primitive lives while the body runs. The frame (one per
// backend) stages every operand this way around the variant's body; a `global` operand it does
// not stage: the body reads it where it lies (a program's input, by index: gather_global).
enum class Staging { registers, shared, scalar, global };
struct OperandStaging {
  int operand = -1;  // index into call.inputs; -1 is the output
  Staging kind = Staging::registers;
  DType dtype = DType::float32;
  long long elements = 1;  // per tile
  bool load = true;        // read from global memory before the body
  bool store = false;      // written back after the body
  std::shared_ptr<const RegisterPlacement> place;  // registers: which thread and slot holds what
  std::optional<TileLayout> layout;                // shared: the tile's memory layout
};

// A variant's own descriptors (fold views, masks, group shapes), read by its executors.
struct VariantPlan {
  virtual ~VariantPlan() = default;
};

struct Plan {
  std::string variant;
  int priority = 0;
  OpCall call;  // as resolved by the planner: the output's layout and shape are set
  DispatchContext context;
  std::vector<std::pair<std::string, ParamValue>> params;
  std::vector<std::pair<std::string, std::string>> numerics;
  std::vector<TraceEntry> trace;
  std::vector<OperandStaging> staging;  // tile primitives; empty for collectives
  std::shared_ptr<const VariantPlan> detail;
  // While the planner runs: what the variant's analysing predicate found (registry.h); dropped
  // once the plan is made.
  std::shared_ptr<const void> analysis;

  void set(const std::string& key, ParamValue value);
  void note(const std::string& key, const std::string& value);  // a numerics entry
  template <class D> const D& detail_as() const { return static_cast<const D&>(*detail); }
  template <class A> const A* analysis_as() const { return static_cast<const A*>(analysis.get()); }
  const OperandStaging& staged_output() const;

  std::string str() const;  // the call, the context, the trace table, then params and numerics
};

}  // namespace tp
