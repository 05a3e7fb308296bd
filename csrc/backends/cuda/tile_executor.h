// The CUDA backend's executors of tile variants and what every kernel launch shares. A tile
// variant's executor is its kernel body (declarations and one call of its device template),
// which a program's kernel calls as one of its steps (program_frame.h; a standalone call is the
// program of one step), so it is never bound alone. Collectives (treduce) build and bind their
// own kernels (CudaExecutor).
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

class CudaTileExecutor : public Executor {
 public:
  using MakeBody = KernelBody (*)(const Plan&);
  // null: a step whose code the program frame writes itself (a copy between placements)
  explicit CudaTileExecutor(MakeBody make) : make_(make) {}
  // ValueError: a tile variant runs inside a program's kernel (bound_program.h), never alone.
  std::shared_ptr<const Runner> bind(const Plan& plan) const override;
  // ValueError for a step the program frame writes itself.
  KernelBody body(const Plan& plan) const;

 private:
  MakeBody make_;
};

// The variant's body for a plan (its declarations and one call of its device template), as a
// program's kernel calls it; ValueError when the variant has no CUDA tile executor.
KernelBody kernel_body(const Plan& plan);

// tp_kernel of a compiled binary, loaded into the current context (the module stays loaded for the
// process: runners are cached), allowed `shared_bytes` of dynamic shared memory per block.
// cluster_ctas: the CTAs of the kernel's thread-block clusters (__cluster_dims__); past the portable 8
// the function opts in to a non-portable size.
CUfunction load_kernel(const CompiledKernel& binary, long long shared_bytes, int cluster_ctas = 1);

// cuLaunchKernel of a tile or program kernel on `device`'s current context. Out of memory at the
// launch is the local memory of spilled registers, which CUDA reserves for every thread the GPU
// holds at once: CudaError says how much and what spreads it.
void launch_kernel(CUfunction function, long long blocks, long long block_threads, long long shared_bytes,
                   CUstream stream, void** params, int device);

// The plan's kernel for `arch`, from the kernel cache or compiled now (tp.lower of a collective).
// ValueError when the variant has no CUDA executor that builds kernels of its own.
BuiltKernel build_kernel(const Plan& plan, const std::string& arch);

}  // namespace tp::cuda
