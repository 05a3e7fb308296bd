// A backend's runner, bound on first use and kept (binding may compile or load a kernel): later
// calls take no lock, and a failed bind is retried by the next call. BoundPlan and the programs'
// BoundProgram hold one each.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>

namespace tp {

template <class Runner> class BindOnce {
 public:
  // make() -> std::shared_ptr<const Runner>, called once it is needed
  template <class Make> const Runner& get(Make make) const {
    if (const Runner* r = bound_.load(std::memory_order_acquire)) return *r;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!runner_) {
      runner_ = make();
      bound_.store(runner_.get(), std::memory_order_release);
    }
    return *runner_;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const Runner> runner_;
  mutable std::atomic<const Runner*> bound_{nullptr};  // set once bound
};

}  // namespace tp
