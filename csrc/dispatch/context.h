// DispatchContext: what dispatch models besides the call: the target architecture.
#pragma once
#include <string>

namespace tp {

struct DispatchContext {
  std::string target;   // "sm_90a", "sm_100a", ... or empty: no architecture
  int sm_version = 0;   // sm_100a -> 100; 0 without an architecture

  // Accepts "" (none) or sm_<digits> with an optional a/f suffix; ValueError otherwise.
  static DispatchContext for_target(const std::string& target);
};

}  // namespace tp
