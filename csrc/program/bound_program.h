// A program call signature bound to the backend that runs it, standalone calls and programs
// alike (a standalone call is the program of one step): its plan and, once it first runs, the
// backend's runner for it (the CPU's runner of the steps, the CUDA kernel compiled and loaded), so
// that a repeated call is a run. Backends register a program executor each; the program layer
// asks nobody else.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/bind_once.h"
#include "program/program_plan.h"

namespace tp {

struct ProgramArgs {
  std::vector<std::uintptr_t> inputs;   // one per program input: [tiles][tile] (one tile where the batch shares it)
  std::vector<double> scalars;          // the call's run-time scalars (ProgramPlan::scalar_args)
  std::vector<std::uintptr_t> outputs;  // one per output: [tiles][tile]; read first where a step accumulates
  long long tiles = 1;
  int device = -1;          // the CUDA device the arrays live on; -1: host memory (NumPy)
  std::uintptr_t stream = 0;  // CUDA: the caller's stream, on which the launch is ordered
  // Host work polls this between pieces of at most a few milliseconds; true stops the run with
  // Interrupted.
  std::function<bool()> interrupted;
};

class ProgramRunner {
 public:
  virtual ~ProgramRunner() = default;
  virtual void run(const ProgramArgs& args) const = 0;
  // How it will run, for Plan.launch(): launch shape, kernel origin, ... (key, value).
  virtual std::vector<std::pair<std::string, std::string>> describe() const { return {}; }
};

using ProgramBinder = std::shared_ptr<const ProgramRunner> (*)(const std::shared_ptr<const ProgramPlan>& plan);
// The backend's binder of programs; a backend registers one when the module loads.
void add_program_executor(const std::string& backend, ProgramBinder bind);

class BoundProgram {
 public:
  explicit BoundProgram(std::shared_ptr<const ProgramPlan> plan) : plan_(std::move(plan)) {}
  const ProgramPlan& plan() const { return *plan_; }
  const std::shared_ptr<const ProgramPlan>& shared_plan() const { return plan_; }
  // The backend's runner, bound on first use (compiling or loading a kernel); a failed bind is
  // retried by the next call.
  const ProgramRunner& runner() const;

 private:
  std::shared_ptr<const ProgramPlan> plan_;
  BindOnce<ProgramRunner> runner_;
};

}  // namespace tp
