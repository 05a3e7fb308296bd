#include "backends/cuda/place_types.h"

#include <algorithm>
#include <sstream>

namespace tp {

namespace {

// A table the device indexes (a template argument of tp::SlotTable).
std::string int_table(const std::string& name, const std::vector<int>& values) {
  std::ostringstream os;
  os << "__device__ constexpr int " << name << "[" << std::max<size_t>(values.size(), 1) << "] = {";
  for (size_t i = 0; i < values.size(); ++i) os << (i ? (i % 32 ? ", " : ",\n    ") : "") << values[i];
  if (values.empty()) os << "-1";
  os << "};\n";
  return os.str();
}

// A placement's table, indexed [slot] when every thread reads the same (one thread, or a
// thread-private tile), else [slot * kThreads + lane].
bool per_slot(const RegisterPlacement& p, bool loads) { return p.threads == 1 || (loads && p.thread_private); }

}  // namespace

std::string PlaceTables::name(const std::vector<int>& values, bool loads, const std::string& fresh) {
  auto [it, added] = names_.emplace(std::make_pair(loads, values), fresh);
  if (added) decls_ += int_table(fresh, values);
  return it->second;
}

std::string table_place_type(const std::string& name, const RegisterPlacement& p, PlaceTables& tables, bool load,
                             bool store) {
  std::string args;
  for (const bool loads : {true, false}) {
    args += loads ? "" : ", ";
    if (!(loads ? load : store)) {
      args += "tp::NoSlots";
      continue;
    }
    std::vector<int> values = loads ? p.load : p.store;
    if (per_slot(p, loads)) {  // every lane's entry is slot s's
      for (int k = 0; k < p.slots; ++k) values[k] = values[static_cast<size_t>(k) * p.threads];
      values.resize(static_cast<size_t>(p.slots));
    }
    args += "tp::SlotTable<" + std::string(per_slot(p, loads) ? "1" : "kThreads") + ", " +
            tables.name(values, loads, name + (loads ? "_load" : "_store")) + ">";
  }
  return tables.take() + "using " + name + " = tp::TablePlace<" + args + ">;\n";
}

std::string run_place_type(const RunForm& f) {
  return "tp::RunPlace<" + std::to_string(f.owners) + ", " + std::to_string(f.vec) +
         (f.padded_elements ? ", " + std::to_string(f.padded_elements) : "") + ">";
}

std::string cuda_place_type(const std::string& name, const RegisterPlacement& p) {
  const RunForm& f = p.run;
  if (f.owners > 0) return "using " + name + " = " + run_place_type(f) + ";\n";
  PlaceTables tables;
  return table_place_type(name, p, tables);
}

}  // namespace tp
