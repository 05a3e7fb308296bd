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

// Registers alone hold the SM to few warps, with no local memory to lose by changing the build.
bool few_warps_by_registers(const Residency& r, const FunctionResources& f) {
  return r.warps < kFewWarps && r.limit.rfind("registers", 0) == 0 && f.frame_bytes == 0;
}

// The scope instances per block (fewer than k's) at which k's registers let the most warps on an
// SM, or k's own where none lets more; its shared memory taken as its instances' share of k's.
int densest_instances(const BuiltKernel& k, const Residency& r, const FunctionResources& f) {
  const int instances = k.source.instances, instance_threads = k.source.block_threads() / instances;
  int best = instances, best_warps = r.warps;
  for (int i = instances - 1; i >= 1; --i) {
    const long long shared = (k.source.shared_bytes * i + instances - 1) / instances + f.static_shared;
    const Residency ri = residency(k.arch, i * instance_threads, f.registers, shared, f.barriers < 0 ? 0 : f.barriers);
    if (ri.warps > best_warps) best = i, best_warps = ri.warps;
  }
  return best;
}

// The body's register target (KernelBody::register_target) asked of ptxas where k takes more:
// kept where the blocks it allows fit and its spills stay within a few words a thread (measured on
// an H200: SwiGLU's estimated chain at 40 registers, 16 bytes spilled, ran 0.41 ms against 0.42-0.47
// at ptxas' own 48; capped at 32, spilling 56 bytes, 0.70).
constexpr long long kFewSpilledBytes = 16;
// Where the target spills more, a block fewer at a time, down to one more than ptxas' own count
// (GeGLU's chain, 59 registers unasked, fits 10 blocks with no spill, 11 and 12 spill 64 bytes).
BuiltKernel at_register_target(BuiltKernel k, const FrameSpec& spec, const std::string& arch) {
  Residency r;
  FunctionResources f;
  if (!residency_of(k, r, f) || f.registers <= spec.body.register_target) return k;
  const auto blocks_at = [&](int registers) {
    return residency(arch, k.source.block_threads(), registers, k.source.shared_bytes + f.static_shared,
                     f.barriers < 0 ? 0 : f.barriers).blocks;
  };
  for (int blocks = blocks_at(spec.body.register_target); blocks > r.blocks; --blocks) {
    BuiltKernel capped = compiled(render_kernel(spec, arch, blocks), arch);
    Residency rc;
    FunctionResources fc;
    if (residency_of(capped, rc, fc) && rc.blocks == blocks && fc.frame_bytes <= kFewSpilledBytes) return capped;
  }
  return k;
}

// The frame at the most warps an SM holds (kernel_build.h); `max_instances` the instances it took.
BuiltKernel densest_build(const std::function<FrameSpec(int max_instances)>& frame, const std::string& arch,
                          int& max_instances) {
  const FrameSpec spec = frame(0);
  BuiltKernel k = compiled(render_kernel(spec, arch), arch);
  if (spec.body.register_target > 0) return at_register_target(std::move(k), spec, arch);
  Residency r;
  FunctionResources f;
  if (!residency_of(k, r, f) || !few_warps_by_registers(r, f)) return k;
  const int fewer = densest_instances(k, r, f);
  if (fewer < k.source.instances) {
    BuiltKernel smaller = compiled(render_kernel(frame(fewer), arch), arch);
    Residency rs;
    FunctionResources fs;
    if (residency_of(smaller, rs, fs) && rs.warps > r.warps && fs.frame_bytes == 0) {
      k = std::move(smaller), r = rs, f = fs, max_instances = fewer;
      if (!few_warps_by_registers(r, f)) return k;
    }
  }
  BuiltKernel denser = compiled(render_kernel(frame(max_instances), arch, r.blocks + 1), arch);
  Residency rd;
  FunctionResources fd;
  if (residency_of(denser, rd, fd) && rd.blocks > r.blocks && fd.frame_bytes == 0) return denser;
  return k;
}

}  // namespace

BuiltKernel build_frame(const std::function<FrameSpec(int max_instances)>& frame, const std::string& arch) {
  int max_instances = 0;
  BuiltKernel k = densest_build(frame, arch, max_instances);
  Residency r;
  FunctionResources f;
  if (!residency_of(k, r, f) || r.blocks != 1 || k.source.instances != 1) return k;
  // One block on the SM: no other block's loads overlap its work, so its next tile loads as it works.
  FrameSpec spec = frame(max_instances);
  if (!spec.prefetch_if_alone) return k;
  spec.prefetch = true;
  if (!frame_launch(spec, arch).any(OperandPath::prefetched)) return k;
  BuiltKernel prefetching = compiled(render_kernel(spec, arch, k.source.min_blocks), arch);
  Residency rp;
  FunctionResources fp;
  if (residency_of(prefetching, rp, fp) && rp.blocks == 1 && fp.frame_bytes == 0) return prefetching;
  return k;
}

}  // namespace tp::cuda
