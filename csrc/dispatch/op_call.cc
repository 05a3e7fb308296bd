#include "dispatch/op_call.h"

#include <sstream>

#include "dispatch/value_str.h"
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

const std::vector<Storage>& storages() {
  static const std::vector<Storage> all = {Storage::local, Storage::shared, Storage::shared_dyn, Storage::global};
  return all;
}

Storage storage_from_name(const std::string& name) {
  for (Storage s : storages()) {
    if (name == storage_name(s)) return s;
  }
  // Suggest only the storages a tile variant stages into ('global' parses, but no tile variant takes it).
  std::string hint;
  if (name == "smem" || name == "shmem" || name == "shared_memory") hint = " (did you mean 'shared'?)";
  if (name == "reg" || name == "regs" || name == "registers" || name == "rmem") hint = " (did you mean 'local'?)";
  throw ValueError("storage: unknown storage scope '" + name + "'" + hint +
                   "; use 'local' (registers), 'shared' or 'shared.dyn' (shared memory)");
}

long long TileRef::elements() const {
  long long n = 1;
  for (long long d : shape) n *= d;
  return n;
}

std::string TileRef::str() const {
  if (scalar) return "scalar";
  std::ostringstream os;
  os << dtype_name(dtype) << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "] " << storage_name(storage);
  if (layout) os << " " << layout->str();
  if (device >= 0) os << " cuda:" << device;
  return os.str();
}

std::string config_str(const ConfigValue& v) { return value_str(v, true); }

bool OpCall::flag(const std::string& key) const {
  auto it = config.find(key);
  if (it == config.end()) return false;
  if (const bool* b = std::get_if<bool>(&it->second)) return *b;
  throw TypeError(key + ": expected True or False, not " + config_str(it->second));
}

long long OpCall::integer(const std::string& key, long long fallback) const {
  auto it = config.find(key);
  if (it == config.end()) return fallback;
  if (const long long* i = std::get_if<long long>(&it->second)) return *i;
  throw TypeError(key + ": expected an int, not " + config_str(it->second));
}

std::string OpCall::text(const std::string& key, const std::string& fallback) const {
  auto it = config.find(key);
  if (it == config.end()) return fallback;
  if (const std::string* s = std::get_if<std::string>(&it->second)) return *s;
  throw TypeError(key + ": expected a string, not " + config_str(it->second));
}

std::string OpCall::str() const {
  std::ostringstream os;
  os << "tp." << op() << "(";
  for (size_t i = 0; i < inputs.size(); ++i) os << (i ? ", " : "") << inputs[i].arg << "=" << inputs[i].str();
  if (def->family == OpFamily::reduction) {
    os << ", axes=(";
    for (size_t i = 0; i < axes.size(); ++i) os << (i ? ", " : "") << axes[i];
    os << (axes.size() == 1 ? ",)" : ")");
    if (accum) os << ", accum=True";
  }
  if (def->family != OpFamily::collective) os << ", scope=" << scope.str();
  if (treduce) os << ", " << treduce->str();
  for (const auto& [key, value] : config) os << ", " << key << "=" << config_str(value);
  if (!dispatch.empty()) os << ", dispatch='" << dispatch << "'";
  os << ") -> " << output.arg << "=" << output.str();
  return os.str();
}

std::string OpCall::key() const {
  std::ostringstream os;
  os << str();
  for (const auto& [key, value] : config) os << "|" << key << "=" << config_str(value);
  if (numerator_part_of_divisor) os << "|numerator_part_of_divisor";
  auto strides = [&](const TileRef& t) {
    os << "|" << t.arg << ":";
    for (long long s : t.strides) os << s << ",";
  };
  for (const TileRef& t : inputs) strides(t);
  strides(output);
  return os.str();
}

}  // namespace tp
