#include "dispatch/plan.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "dispatch/value_str.h"

namespace tp {

void Plan::set(const std::string& key, ParamValue value) {
  for (auto& kv : params) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  params.emplace_back(key, std::move(value));
}

void Plan::note(const std::string& key, const std::string& value) { numerics.emplace_back(key, value); }

const OperandStaging& Plan::staged_output() const {
  for (const OperandStaging& s : staging) {
    if (s.operand < 0) return s;
  }
  throw std::logic_error("plan of " + variant + " stages no output");
}

std::string param_str(const ParamValue& v) { return value_str(v, false); }

std::string trace_table(const std::vector<TraceEntry>& trace) {
  size_t wv = std::string("variant").size(), ws = std::string("status").size();
  for (const TraceEntry& e : trace) {
    wv = std::max(wv, e.variant.size());
    ws = std::max(ws, e.status.size());
  }
  auto pad = [](std::string s, size_t w) { return s + std::string(w > s.size() ? w - s.size() : 0, ' '); };
  std::ostringstream os;
  os << "  " << pad("variant", wv) << "  priority  " << pad("status", ws) << "  reasons\n";
  for (const TraceEntry& e : trace) {
    std::string reasons;
    for (const std::string& r : e.reasons) reasons += (reasons.empty() ? "" : "; ") + r;
    os << "  " << pad(e.variant, wv) << "  " << pad(std::to_string(e.priority), 8) << "  " << pad(e.status, ws)
       << "  " << reasons << "\n";
  }
  return os.str();
}

std::string Plan::str() const {
  std::ostringstream os;
  os << call.str() << "\n" << context.str() << "\n" << trace_table(trace);
  os << "chosen: " << variant << " (priority " << priority << ")\n";
  for (const auto& [k, v] : params) os << "  " << k << " = " << param_str(v) << "\n";
  os << "numerics:\n";
  for (const auto& [k, v] : numerics) os << "  " << k << ": " << v << "\n";
  return os.str();
}

}  // namespace tp
