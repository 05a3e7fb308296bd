#include "dispatch/context.h"

#include <sstream>
#include <stdexcept>

namespace tp {

const std::string& DispatchContext::device_target(size_t i) const {
  if (i >= device_targets.size()) throw std::logic_error("dispatch context: no device architecture for a CUDA run");
  return device_targets[i];
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
  os << "|archs:";
  for (const std::string& t : device_targets) os << t << ";";
  os << "|sms:" << multiprocessors << "|nccl:" << nccl;
  return os.str();
}

}  // namespace tp
