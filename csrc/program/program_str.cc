// A program's values and plan as text.
#include "program/program_plan.h"

namespace tp {

namespace {
long long product(const std::vector<long long>& shape) {
  long long n = 1;
  for (long long d : shape) n *= d;
  return n;
}
}  // namespace

long long ProgramValue::elements() const { return product(shape); }

std::string ProgramValue::placement() const {
  return layout ? std::string(storage_name(storage)) + " " + layout->str() : std::string("not staged");
}

std::string ProgramPlan::str() const {
  std::string out = "program " + name + " at scope " + scope.str() + "; " + context.str() + "\n";
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
  if (peak_registers > register_budget()) {
    out += "\nspills: the tiles live at once take " + std::to_string(peak_registers) + " registers per thread; a "
           "thread of scope " + scope.str() + " holds at most " + std::to_string(register_budget()) + " (" +
           std::to_string(kRegistersPerBlock) + " per block, " + std::to_string(kRegistersPerThread) +
           " per thread), so on a GPU the rest spill to local memory, slowly. Fix: fewer elements per "
           "thread (a wider scope, more batch_dims), or storage='shared' for the steps whose tiles need not stay in "
           "registers";
  }
  return out;
}

}  // namespace tp
