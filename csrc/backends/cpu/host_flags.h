// Flags in host memory shared between processes (a POSIX shared-memory segment): a rank
// publishes a call number with a release store after writing what it announces, another
// observes it with an acquire load before reading that. Python has no such ordering of its
// own; these are the two instructions it needs.
#pragma once
#include <chrono>
#include <cstdint>
#include <vector>

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

// Spins until every flag at `addresses` holds at least `value`, for up to `seconds`: the indices
// of those that still hold less (empty: all arrived). A rank's flags rise microseconds apart in a
// small call, so this looks every few nanoseconds instead of every Python loop turn.
inline std::vector<int> await_flags(const std::vector<std::uintptr_t>& addresses, std::uint64_t value,
                                    double seconds) {
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  std::vector<int> missing;
  for (unsigned turn = 0;; ++turn) {
    missing.clear();
    for (size_t i = 0; i < addresses.size(); ++i) {
      if (observe_flag(addresses[i]) < value) missing.push_back(static_cast<int>(i));
    }
    if (missing.empty() || (turn % 64 == 0 && Clock::now() >= until)) return missing;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
}

}  // namespace tp::cpu
