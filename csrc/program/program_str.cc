// A program's values and plan: what they hold, and as text.
#include "program/program_plan.h"

#include "layout/placement.h"

namespace tp {

namespace {
long long product(const std::vector<long long>& shape) {
  long long n = 1;
  for (long long d : shape) n *= d;
  return n;
}
}  // namespace

long long ProgramValue::elements() const { return product(shape); }

bool ProgramValue::held_by_every_lane(const ExecScope& scope) const {
  if (!in_registers()) return false;
  return place_in_registers(*layout, scope, name)->whole_in_every_thread(elements());
}

std::string ProgramValue::placement() const {
  return layout ? std::string(storage_name(storage)) + " " + layout->str() : std::string("not staged");
}

double ProgramPlan::scalar(const ProgramStep& s, size_t i, const std::vector<double>& run_time) const {
  const int arg = i < s.scalar_args.size() ? s.scalar_args[i] : -1;
  return arg >= 0 ? run_time.at(static_cast<size_t>(arg)) : s.scalars.at(i);
}

int ProgramPlan::scalar_source(int id) const {
  for (const ProgramStep& s : steps) {
    if (s.result != id || s.op != "copy") continue;
    const int a = s.operands.at(0);
    const ProgramValue& src = values.at(a);
    if (src.elements() == 1 && (rows || src.held_by_every_lane(scope) || !src.in_registers())) return a;
  }
  return -1;
}

bool ProgramPlan::frame_stages_every_tile() const {
  if (steps.size() != 1 || outputs.size() != 1 || steps.front().result != outputs.front()) return false;
  for (int id : steps.front().operands) {
    if (id >= 0 && values.at(static_cast<size_t>(id)).input < 0) return false;
  }
  return true;
}

std::string ProgramPlan::str() const {
  std::string out = "program " + name + " at scope " + scope.str() +
                    (scope_trace.empty() ? "" : " (the planner's choice: no scope is named)") + "; " + context.str() +
                    "\n";
  out += "inputs:";
  for (const ProgramValue& v : values) {
    if (v.input >= 0) {
      out += " " + v.name + " " + dtype_name(v.dtype) + shape_str(v.shape) + " " + v.placement() +
             (v.batch_broadcast ? " (one tile for the whole batch)" : "");
    }
  }
  out += "\n";
  for (size_t k = 0; k < steps.size(); ++k) {
    const ProgramStep& s = steps[k];
    if (!s.sync_before.empty()) out += "      -- " + s.sync_before + " --\n";
    std::string args;
    for (int id : s.operands) {
      args += (args.empty() ? "" : ", ") + (id < 0 ? std::string("scalar") : values[id].name);
    }
    const ProgramValue& r = values[s.result];
    out += "  " + std::to_string(k) + (s.inserted ? "+ " : "  ") + r.name + " = " + s.op + "(" + args + ") -> " +
           s.bound->plan().variant + "; " + dtype_name(r.dtype) + shape_str(r.shape) + " " + r.placement() + "  [" +
           s.where + "]\n";
    for (const std::string& why : s.reasons) out += "        " + why + "\n";
  }
  std::string outs;
  for (int id : outputs) outs += (outs.empty() ? "" : ", ") + values[id].name;
  out += "outputs: " + outs + "; shared memory between steps " + std::to_string(shared_bytes) + " bytes (by live range); " +
         "registers " + std::to_string(peak_register_slots) + " slots per thread at most";
  if (!folded.empty()) {
    std::string names;
    for (int j : folded) names += (names.empty() ? "" : ", ") + values[outputs[j]].name;
    out += "\nfolded: " + names + ", each summed over runs of " + std::to_string(folded_tiles) +
           " consecutive instances of the batch, in order, in the wide float (a tile a run)";
  }
  out += "\nstaging: " + staging;
  for (const StagingVerdict& v : staging_trace) {
    out += "\n  " + v.name + (v.name == staging ? " (runs)" : v.accepted ? " (accepts)" : " (declines)") + ":";
    for (const std::string& why : v.reasons) out += "\n      " + why;
  }
  return out + scope_trace_str();
}

std::string ProgramPlan::scope_trace_str() const {
  if (scope_trace.empty()) return "";
  std::string out = "\nscope: " + scope.str() + ", staging " + staging + " (the planner's choice: no scope is named)";
  for (const ScopeVerdict& v : scope_trace) {
    out += "\n  " + v.scope + (v.staging.empty() ? "" : " " + v.staging) +
           (v.chosen ? " (runs)" : v.accepted ? " (accepts)" : " (declines)") + ":";
    for (const std::string& why : v.reasons) out += "\n      " + why;
  }
  return out;
}

}  // namespace tp
