#include "dispatch/context.h"

#include <algorithm>
#include <sstream>

#include "errors.h"

namespace tp {

const std::vector<std::string>& DispatchContext::known_targets() {
  static const std::vector<std::string> targets = {
      "sm_75",  "sm_80",   "sm_86",   "sm_87",  "sm_88",   "sm_89",   "sm_90",   "sm_90a",  "sm_100", "sm_100a",
      "sm_100f", "sm_101", "sm_101a", "sm_101f", "sm_103", "sm_103a", "sm_103f", "sm_110", "sm_110a",
      "sm_110f", "sm_120", "sm_120a", "sm_120f", "sm_121", "sm_121a", "sm_121f"};
  return targets;
}

int DispatchContext::sm_version_of(const std::string& target) {
  if (target.empty()) return 0;
  const auto& known = known_targets();
  if (std::find(known.begin(), known.end(), target) == known.end()) {
    std::string names;
    for (const std::string& t : known) names += (names.empty() ? "" : ", ") + t;
    throw ValueError("target: '" + target + "' is not a known architecture; the targets are " + names);
  }
  return std::stoi(target.substr(3));
}

bool DispatchContext::has_peer_access(size_t i, size_t j) const {
  if (i == j) return true;
  return i < peer.size() && j < peer[i].size() && peer[i][j];
}

std::string DispatchContext::str() const {
  std::ostringstream os;
  os << "target " << (target.empty() ? "none (sm_version 0)" : target) << ", backend " << backend;
  if (!devices.empty()) {
    os << ", devices [";
    for (size_t i = 0; i < devices.size(); ++i) os << (i ? ", " : "") << devices[i];
    os << "]";
  }
  return os.str();
}

std::string DispatchContext::key() const {
  std::ostringstream os;
  os << str() << "|peer:";
  for (const auto& row : peer) {
    for (bool p : row) os << (p ? '1' : '0');
    os << ";";
  }
  os << "|sms:" << multiprocessors << "|nccl:" << nccl;
  return os.str();
}

}  // namespace tp
