#include "backends/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <exception>
#include <thread>
#include <vector>

#include "dispatch/executor.h"

namespace tp {

namespace {
constexpr long long kWorkPerThread = 1 << 16;  // element operations: below this a thread costs more than it saves
constexpr auto kPollInterval = std::chrono::milliseconds(20);
}  // namespace

void parallel_for(long long count, long long cost_per_item, const std::function<bool()>& interrupted,
                  const std::function<void(long long, long long, const std::function<bool()>&)>& body) {
  if (count <= 0) return;
  // asked once: glibc reads /sys for it, which would cost a small call ~10 us every time
  static const long long cores = std::max(1u, std::thread::hardware_concurrency());
  const long long by_work = std::max(1ll, count * std::max(1ll, cost_per_item) / kWorkPerThread);
  const long long threads = std::min({cores, by_work, count});
  std::atomic<bool> stop{false};
  bool was_interrupted = false;
  auto next_poll = std::chrono::steady_clock::now() + kPollInterval;
  auto caller_keeps_going = [&] {
    if (interrupted && std::chrono::steady_clock::now() >= next_poll) {
      next_poll = std::chrono::steady_clock::now() + kPollInterval;
      if (interrupted()) {
        was_interrupted = true;
        stop = true;
      }
    }
    return !stop.load(std::memory_order_relaxed);
  };
  auto others_keep_going = [&] { return !stop.load(std::memory_order_relaxed); };
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  std::mutex mutex;
  std::condition_variable all_done;
  long long finished = 0;  // under mutex
  std::vector<std::thread> pool;
  auto range = [&](long long i) { return count * i / threads; };
  for (long long i = 1; i < threads; ++i) {
    pool.emplace_back([&, i] {
      try {
        body(range(i), range(i + 1), others_keep_going);
      } catch (...) {
        errors[i] = std::current_exception();
        stop = true;
      }
      std::lock_guard<std::mutex> lock(mutex);
      ++finished;
      all_done.notify_one();
    });
  }
  try {
    body(range(0), range(1), caller_keeps_going);
  } catch (...) {
    errors[0] = std::current_exception();
    stop = true;
  }
  {  // the others still work: keep answering Ctrl-C meanwhile
    std::unique_lock<std::mutex> lock(mutex);
    while (!all_done.wait_for(lock, kPollInterval, [&] { return finished == threads - 1; })) {
      lock.unlock();
      caller_keeps_going();
      lock.lock();
    }
  }
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  if (was_interrupted) throw Interrupted();
}

}  // namespace tp
