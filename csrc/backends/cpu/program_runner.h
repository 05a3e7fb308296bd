// The CPU backend runs a tile program step by step (a standalone call is the program of one step):
// each step is the bound plan its standalone call would run (same executor, same device
// template), over host tiles that hold every intermediate in logical order, a chunk of the batch
// at a time so the intermediates stay in cache. So each step's bits are the standalone op's, and
// the program's are those of the chain of standalone calls.
#pragma once
#include <memory>
#include <vector>

#include "program/bound_program.h"
#include "program/program_plan.h"

namespace tp {

class HostProgramRunner : public ProgramRunner {
 public:
  explicit HostProgramRunner(std::shared_ptr<const ProgramPlan> plan);
  // inputs: one per program input ([tiles][tile elements], or one tile when batch_broadcast);
  // outputs: one per program output ([tiles][tile elements]), holding the old values where a
  // step accumulates into one. Host memory only.
  void run(const ProgramArgs& args) const override;

 private:
  // Steps over tiles [first, first + n), value v at at(v).
  template <class At>
  void run_steps(const ProgramArgs& args, long long first, long long n, const At& at, bool whole_batch) const;

  std::shared_ptr<const ProgramPlan> plan_;
  std::vector<long long> bytes_;  // per tile of each value
  std::vector<int> direct_;       // the output a value is written straight into, or -1
  bool buffered_ = false;         // some value lives in a buffer of the run's (intermediates, a shared tile)
  long long widest_ = 1, per_tile_ = 0;  // elements of the widest value, of all values, per tile
};

// Registers HostProgramRunner as the cpu backend's runner of programs (program/bound_program.h).
void register_cpu_program_executor();

}  // namespace tp
