// DispatchContext: the facts predicates need besides the call: the architecture dispatch
// models, the backend that will run the plan, the devices the operands live on and whether
// those can reach each other's memory, and whether NCCL loaded. Built by the caller (the
// bindings ask the backends); dispatch itself asks nobody.
#pragma once
#include <string>
#include <vector>

namespace tp {

struct DispatchContext {
  std::string target;   // "sm_90a", "sm_100a", ... or empty: no architecture
  int sm_version = 0;   // sm_100a -> 100; 0 without an architecture (architecture.h)
  // cuda: the architecture of each device the kernels run on (devices[i], or device 0 when
  // the operands are host arrays), which the executors build for; `target` may model another
  std::vector<std::string> device_targets;
  std::string backend = "cpu";  // "cpu" or "cuda"
  std::vector<int> devices;     // CUDA ordinals of the operands (collectives: one per rank)
  int multiprocessors = 0;      // SMs of the smallest of those GPUs
  // peer[i][j]: device devices[i] can read and write device devices[j]'s memory directly
  std::vector<std::vector<bool>> peer;
  bool nccl = false;            // libnccl loaded
  std::string nccl_status;      // why not, when it did not

  const std::string& device_target(size_t i = 0) const;  // logic_error when the context has none
  bool has_peer_access(size_t i, size_t j) const;
  std::string str() const;  // "target sm_90a, backend cuda, devices [0, 1]"
  std::string key() const;  // everything that can change a plan
};

}  // namespace tp
