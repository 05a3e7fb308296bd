// A tile program on the GPU, standalone calls among them (a standalone call is the program of one
// step): its one kernel (the frame of kernel_frame.h around the program's body, program_frame.h)
// compiled through the kernel cache, loaded once per program call signature, and launched on the
// caller's stream over device arrays in place, or over NumPy arrays through the device's staging
// arena.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/driver.h"
#include "backends/cuda/kernel_build.h"
#include "backends/cuda/kernel_cache.h"
#include "backends/cuda/program_frame.h"
#include "program/bound_program.h"

namespace tp::cuda {

// The program's kernel for `arch`, from the kernel cache or compiled now (tp.lower).
BuiltKernel build_program(const ProgramPlan& plan, const std::string& arch);

class ProgramKernel : public ProgramRunner {
 public:
  // Built for the architecture of the plan's device (its context's first device, or 0).
  explicit ProgramKernel(std::shared_ptr<const ProgramPlan> plan);
  ProgramKernel(const ProgramKernel&) = delete;
  ProgramKernel& operator=(const ProgramKernel&) = delete;

  // Device pointers on the plan's device (args.device >= 0), else host arrays, C-contiguous,
  // through the staging arena (the outputs written once the kernel is done).
  void run(const ProgramArgs& args) const override;
  // The launch shape, the blocks an SM holds and the bytes they keep in flight, the kernel's origin.
  std::vector<std::pair<std::string, std::string>> describe() const override;

 private:
  void launch(const std::vector<CUdeviceptr>& inputs, const std::vector<double>& scalars,
              const std::vector<CUdeviceptr>& outputs, long long tiles, CUstream stream) const;
  void run_host(const ProgramArgs& args) const;

  std::shared_ptr<const ProgramPlan> plan_;
  int device_;
  BuiltKernel built_;
  std::vector<size_t> input_bytes_;   // per tile of each input
  std::vector<bool> input_shared_;    // one tile for the whole batch
  std::vector<size_t> output_bytes_;  // per tile of each output
  std::vector<bool> output_read_;     // read first: a step accumulates into it
  CUcontext context_ = nullptr;
  CUfunction function_ = nullptr;
};

// Registers ProgramKernel as the cuda backend's runner of programs (program/bound_program.h).
void register_cuda_program_executor();

}  // namespace tp::cuda
