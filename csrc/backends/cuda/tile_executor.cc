#include "backends/cuda/tile_executor.h"

#include <cstdio>

#include "backends/cuda/driver.h"
#include "errors.h"

namespace tp::cuda {

CUfunction load_kernel(const CompiledKernel& binary, long long shared_bytes, int cluster_ctas) {
  Driver& d = Driver::get();
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  const std::string& image = binary.cubin.empty() ? binary.ptx : binary.cubin;
  d.check(d.cuModuleLoadData(&module, image.c_str()), "cuModuleLoadData");
  d.check(d.cuModuleGetFunction(&function, module, kKernelName), "cuModuleGetFunction");
  // the kernel's own __shared__ arrays (a reduction's partials) count against the default 48 KiB too: a
  // folded LayerNorm backward's 48 KiB of dynamic shared memory beside them failed to launch (H200)
  int static_bytes = 0;
  if (d.cuFuncGetAttribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function) != CUDA_SUCCESS) static_bytes = 0;
  if (shared_bytes + static_bytes > 48 * 1024) {  // past the default, a kernel opts in
    d.check(d.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 static_cast<int>(shared_bytes)),
            "cuFuncSetAttribute(max dynamic shared memory)");
  }
  if (cluster_ctas > 8) {
    d.check(d.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
            "cuFuncSetAttribute(non-portable cluster size)");
  }
  return function;
}

void launch_kernel(CUfunction function, long long blocks, long long block_threads, long long shared_bytes,
                   CUstream stream, void** params, int device) {
  Driver& d = Driver::get();
  const CUresult r = d.cuLaunchKernel(function, static_cast<unsigned>(blocks), 1, 1, static_cast<unsigned>(block_threads),
                                      1, 1, static_cast<unsigned>(shared_bytes), stream, params, nullptr);
  int local = 0;
  if (r == CUDA_ERROR_OUT_OF_MEMORY &&
      d.cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, function) == CUDA_SUCCESS && local > 0) {
    const double gib = static_cast<double>(local) * d.multiprocessors(device) * d.threads_per_multiprocessor(device) /
                       (1 << 30);
    char reserve[32];
    std::snprintf(reserve, sizeof(reserve), "%.1f GiB", gib);
    throw CudaError("cuLaunchKernel: CUDA_ERROR_OUT_OF_MEMORY: the kernel keeps " + std::to_string(local) +
                    " bytes per thread in local memory (registers spilled: its tiles hold more elements per thread "
                    "than registers do), which CUDA reserves for every thread the GPU holds at once (" + reserve +
                    " here), more than is free; a wider scope (tp.warp, tp.cta(n)) gives each thread fewer elements");
  }
  d.check(r, "cuLaunchKernel");
}

BuiltKernel build_kernel(const Plan& plan, const std::string& arch) {
  const auto* executor = dynamic_cast<const CudaExecutor*>(ExecutorTable::instance().find(plan.variant, "cuda"));
  if (!executor) throw ValueError("backend: no cuda kernel for variant " + plan.variant);
  return executor->build(plan, arch);
}

KernelBody kernel_body(const Plan& plan) {
  const auto* executor = dynamic_cast<const CudaTileExecutor*>(ExecutorTable::instance().find(plan.variant, "cuda"));
  if (!executor) throw ValueError("backend: no cuda kernel body for variant " + plan.variant);
  return executor->body(plan);
}

std::shared_ptr<const Runner> CudaTileExecutor::bind(const Plan& plan) const {
  throw ValueError("backend: " + plan.call.op() + " [" + plan.variant + "] runs on the cuda backend inside a program's "
                   "kernel (a standalone call is the program of one step), not alone");
}

KernelBody CudaTileExecutor::body(const Plan& plan) const {
  if (!make_) throw ValueError("backend: the program frame writes " + plan.call.op() + " [" + plan.variant + "] itself");
  return make_(plan);
}

}  // namespace tp::cuda
