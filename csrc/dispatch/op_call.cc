#include "dispatch/op_call.h"

#include <sstream>

#include "errors.h"

namespace tp {

const char* storage_name(Storage s) {
  switch (s) {
    case Storage::local: return "local";
    case Storage::shared: return "shared";
    case Storage::shared_dyn: return "shared.dyn";
    case Storage::global: return "global";
  }
  return "?";
}

Storage storage_from_name(const std::string& name) {
  for (Storage s : {Storage::local, Storage::shared, Storage::shared_dyn, Storage::global}) {
    if (name == storage_name(s)) return s;
  }
  throw ValueError("storage: unknown storage scope '" + name +
                   "'; use 'local', 'shared', 'shared.dyn' or 'global'");
}

const std::vector<OpInfo>& all_ops() {
  static const std::vector<OpInfo> ops = {
      {"sum", OpFamily::reduction, 1},          {"max", OpFamily::reduction, 1},
      {"min", OpFamily::reduction, 1},          {"zero", OpFamily::elementwise, 1},
      {"fill", OpFamily::elementwise, 2},       {"reciprocal", OpFamily::elementwise, 1},
      {"sqrt", OpFamily::elementwise, 1},       {"exp", OpFamily::elementwise, 1},
      {"exp2", OpFamily::elementwise, 1},       {"log2", OpFamily::elementwise, 1},
      {"silu", OpFamily::elementwise, 1},       {"add", OpFamily::elementwise, 2},
      {"sub", OpFamily::elementwise, 2},        {"mul", OpFamily::elementwise, 2},
      {"fdiv", OpFamily::elementwise, 2},       {"maximum", OpFamily::elementwise, 2},
      {"fma", OpFamily::elementwise, 3},        {"cast", OpFamily::elementwise, 1},
  };
  return ops;
}

const OpInfo& op_info(const std::string& op) {
  for (const OpInfo& info : all_ops()) {
    if (info.name == op) return info;
  }
  std::string names;
  for (const OpInfo& info : all_ops()) names += (names.empty() ? "" : ", ") + info.name;
  throw ValueError("op: unknown op '" + op + "'; the ops are " + names);
}

long long TileRef::elements() const {
  long long n = 1;
  for (long long d : shape) n *= d;
  return n;
}

std::string TileRef::str() const {
  if (scalar) {
    std::ostringstream os;
    os << "scalar " << value;
    return os.str();
  }
  std::ostringstream os;
  os << dtype_name(dtype) << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "] " << storage_name(storage);
  if (layout) os << " " << layout->str();
  return os.str();
}

bool OpCall::flag(const std::string& key) const {
  auto it = config.find(key);
  if (it == config.end()) return false;
  if (const bool* b = std::get_if<bool>(&it->second)) return *b;
  if (const long long* i = std::get_if<long long>(&it->second)) return *i != 0;
  throw TypeError(key + ": expected True or False");
}

std::string OpCall::str() const {
  std::ostringstream os;
  os << "tp." << op << "(";
  for (size_t i = 0; i < inputs.size(); ++i) os << (i ? ", " : "") << inputs[i].arg << "=" << inputs[i].str();
  if (info().family == OpFamily::reduction) {
    os << ", axes=(";
    for (size_t i = 0; i < axes.size(); ++i) os << (i ? ", " : "") << axes[i];
    os << (axes.size() == 1 ? ",)" : ")");
    if (accum) os << ", accum=True";
  }
  os << ", scope=" << scope.str();
  for (const auto& [key, value] : config) {
    os << ", " << key << "=";
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, bool>) {
            os << (v ? "True" : "False");
          } else if constexpr (std::is_same_v<V, std::string>) {
            os << "'" << v << "'";
          } else {
            os << v;
          }
        },
        value);
  }
  if (!dispatch.empty()) os << ", dispatch='" << dispatch << "'";
  os << ") -> " << output.arg << "=" << output.str();
  return os.str();
}

}  // namespace tp
