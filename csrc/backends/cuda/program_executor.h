// A tile program on the GPU: its one kernel (the frame of kernel_frame.h around the program's
// body, program_frame.h) compiled through the kernel
// cache, loaded once per program call signature, and launched on the caller's stream over
// device arrays in place, or over NumPy arrays through the device's staging arena.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/driver.h"
#include "backends/cuda/kernel_build.h"
#include "backends/cuda/kernel_cache.h"
#include "backends/cuda/program_frame.h"

namespace tp::cuda {

// The program's kernel for `arch`, from the kernel cache or compiled now (tp.lower).
BuiltKernel build_program(const ProgramPlan& plan, const std::string& arch);

class ProgramKernel {
 public:
  // Built for the architecture of the plan's device (its context's first device, or 0).
  explicit ProgramKernel(std::shared_ptr<const ProgramPlan> plan);
  ProgramKernel(const ProgramKernel&) = delete;
  ProgramKernel& operator=(const ProgramKernel&) = delete;

  // Device pointers, one per program input (in argument order) and per output; the call's
  // run-time scalars.
  void run_device(const std::vector<CUdeviceptr>& inputs, const std::vector<double>& scalars,
                  const std::vector<CUdeviceptr>& outputs, long long tiles, CUstream stream) const;
  // Host arrays, C-contiguous: inputs [tiles][tile] (one tile where the batch shares it),
  // outputs [tiles][tile], written once the kernel is done (and read first where a step
  // accumulates into one).
  void run_host(const std::vector<std::uintptr_t>& inputs, const std::vector<double>& scalars,
                const std::vector<std::uintptr_t>& outputs, long long tiles) const;

  int device() const { return device_; }
  const BuiltKernel& built() const { return built_; }

 private:
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

}  // namespace tp::cuda
