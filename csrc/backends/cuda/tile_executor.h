// The CUDA executor of a tile variant: the variant's kernel body, the frame around it
// (kernel_frame.h), compiled through the kernel cache for the device's architecture, loaded
// once per call signature and launched on the caller's stream. NumPy operands travel through
// the device's staging arena.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/driver.h"
#include "backends/cuda/kernel_build.h"
#include "backends/cuda/kernel_cache.h"
#include "backends/cuda/kernel_frame.h"
#include "dispatch/executor.h"

namespace tp::cuda {

// A CUDA executor that can show its kernel for any architecture (tp.lower), GPU or not.
class CudaExecutor : public Executor {
 public:
  virtual BuiltKernel build(const Plan& plan, const std::string& arch) const = 0;
};

class CudaTileExecutor : public CudaExecutor {
 public:
  using MakeBody = KernelBody (*)(const Plan&);
  explicit CudaTileExecutor(MakeBody make) : make_(make) {}
  BuiltKernel build(const Plan& plan, const std::string& arch) const override;
  std::shared_ptr<const Runner> bind(const Plan& plan) const override;
  KernelBody body(const Plan& plan) const { return make_(plan); }

 private:
  MakeBody make_;
};

// The variant's body for a plan (its declarations and one call of its device template), as a
// program's kernel calls it; ValueError when the variant has no CUDA tile executor.
KernelBody kernel_body(const Plan& plan);

// tp_kernel of a compiled binary, loaded into the current context (the module stays loaded for the
// process: runners are cached), allowed `shared_bytes` of dynamic shared memory per block.
CUfunction load_kernel(const CompiledKernel& binary, long long shared_bytes);

// cuLaunchKernel of a tile or program kernel on `device`'s current context. Out of memory at the
// launch is the local memory of spilled registers, which CUDA reserves for every thread the GPU
// holds at once: CudaError says how much and what spreads it.
void launch_kernel(CUfunction function, long long blocks, long long block_threads, long long shared_bytes,
                   CUstream stream, void** params, int device);

// The launch shape of the plan's kernel for `arch`; nothing rendered or compiled.
KernelSource kernel_launch(const Plan& plan, const std::string& arch);

// The plan's kernel for `arch`, from the kernel cache or compiled now (tp.lower).
// ValueError when the variant has no CUDA executor.
BuiltKernel build_kernel(const Plan& plan, const std::string& arch);

}  // namespace tp::cuda
