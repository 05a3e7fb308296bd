// Flags in host memory shared between processes (a POSIX shared-memory segment): a rank
// publishes a call number with a release store after writing what it announces, another
// observes it with an acquire load before reading that. Python has no such ordering of its
// own; these are the two instructions it needs.
#pragma once
#include <cstdint>

namespace tp::cpu {

inline void publish_flag(std::uintptr_t address, std::uint64_t value) {
  __atomic_store_n(reinterpret_cast<std::uint64_t*>(address), value, __ATOMIC_RELEASE);
}

inline std::uint64_t observe_flag(std::uintptr_t address) {
  return __atomic_load_n(reinterpret_cast<const std::uint64_t*>(address), __ATOMIC_ACQUIRE);
}

// Stores `value` unless the flag already holds as much (flags that only rise), release order.
inline void raise_flag(std::uintptr_t address, std::uint64_t value) {
  auto* flag = reinterpret_cast<std::uint64_t*>(address);
  std::uint64_t now = __atomic_load_n(flag, __ATOMIC_RELAXED);
  while (now < value && !__atomic_compare_exchange_n(flag, &now, value, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
  }
}

}  // namespace tp::cpu
