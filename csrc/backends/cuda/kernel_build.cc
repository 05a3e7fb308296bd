#include "backends/cuda/kernel_build.h"

#include <utility>

#include "backends/cuda/compiler.h"
#include "backends/cuda/kernel_resources.h"

namespace tp::cuda {

namespace {

// Below this many warps per SM a block more is asked for (the H100 runs 64): the kernels measured
// to gain held 16 (2 blocks of 8 warps); those at 32 and more were not measured to.
constexpr int kFewWarps = 24;

BuiltKernel compiled(KernelSource source, const std::string& arch) {
  BuiltKernel k;
  k.source = std::move(source);
  k.arch = arch;
  k.options = kernel_options(k.source.text);
  k.binary = compile_cached(k.source.text, arch, k.options);
  return k;
}

// The kernel's residency, or none where its binary is PTX only.
bool residency_of(const BuiltKernel& k, Residency& r, FunctionResources& f) {
  if (k.binary->cubin.empty()) return false;
  f = function_resources(k.binary->cubin, k.source.function);
  if (f.registers < 0) return false;
  r = residency(k.arch, k.source.block_threads(), f.registers, k.source.shared_bytes + f.static_shared,
                f.barriers < 0 ? 0 : f.barriers);
  return true;
}

}  // namespace

BuiltKernel build_frame(const FrameSpec& spec, const std::string& arch) {
  BuiltKernel k = compiled(render_kernel(spec, arch), arch);
  Residency r;
  FunctionResources f;
  if (!residency_of(k, r, f) || r.warps >= kFewWarps || r.limit.rfind("registers", 0) != 0 || f.frame_bytes != 0) {
    return k;
  }
  BuiltKernel denser = compiled(render_kernel(spec, arch, r.blocks + 1), arch);
  Residency rd;
  FunctionResources fd;
  if (residency_of(denser, rd, fd) && rd.blocks > r.blocks && fd.frame_bytes == 0) return denser;
  return k;
}

}  // namespace tp::cuda
