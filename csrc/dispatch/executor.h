// Executors: how a backend runs a variant's plans. Backends register one per (variant,
// backend); dispatch only asks whether one exists (a variant without one declines) and hands
// plans to it. Binding happens once per call signature (compiling, loading, tables); a bound
// Runner is then called for every repeat of the call.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/plan.h"

namespace tp {

// One operand as the runner reads it: an address in the backend's memory (host or a CUDA
// device) and, for collectives, its element strides.
struct TensorArg {
  std::uintptr_t data = 0;
  std::vector<long long> strides;
  int device = -1;
};

// Seconds a collective waits for another rank by default: tp.comm's default timeout (Python reads
// it as _C.DEFAULT_TIMEOUT_S).
inline constexpr double kDefaultTimeoutS = 300;

struct RunArgs {
  std::vector<TensorArg> inputs;  // one per call input; a scalar operand has data 0
  std::vector<double> scalars;    // one per call input; read where the operand is a scalar
  TensorArg output;               // holds the old values when the call accumulates
  long long tiles = 1;            // tile primitives: operands are [tiles][tile elements]
  std::vector<std::uintptr_t> streams;  // CUDA: one per device of plan.context.devices
  // Collectives whose ranks are other processes: every rank's signal pad (device memory mapped
  // here; empty: one process, the runner's own pad), this call's number on them, and the rank
  // this process runs (its share of the work, or its wait for the workers). The other ranks'
  // processes launch their own parts.
  std::vector<std::uintptr_t> signal_pads;
  unsigned long long epoch = 0;
  int self_rank = -1;
  std::uintptr_t abandoned = 0;  // this process's host gave up on calls up to this one (mapped host memory)
  // Collectives: a GPU that waits longer than this for another rank traps (its stream errs).
  double timeout_s = kDefaultTimeoutS;
  // Host work polls this between pieces of at most a few milliseconds; true stops the run
  // with Interrupted (the caller then reports its own error, e.g. KeyboardInterrupt).
  std::function<bool()> interrupted;
};

struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

class Runner {
 public:
  virtual ~Runner() = default;
  virtual void run(const RunArgs& args) const = 0;
  // How it will run, for tp.plan and Kernel: launch shape, kernel origin, ... (key, value).
  virtual std::vector<std::pair<std::string, std::string>> describe() const { return {}; }
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::shared_ptr<const Runner> bind(const Plan& plan) const = 0;
};

class ExecutorTable {
 public:
  static ExecutorTable& instance();
  void add(const std::string& variant, const std::string& backend, std::unique_ptr<Executor> e);
  const Executor* find(const std::string& variant, const std::string& backend) const;

 private:
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Executor>> executors_;
};

}  // namespace tp
