// A frame compiled for an architecture: its source, NVRTC options and binary, for standalone
// calls and tile programs alike. Where registers alone hold an SM to few of the kernel's warps,
// two more builds are tried, each kept where more warps fit without local memory:
// - blocks of fewer scope instances, where that packs the SM's register partitions closer: on an
//   H200, RMSNorm of rows of 4097 and 2048 at cta(64) and warp scope took 148 registers a thread,
//   and blocks of 4 and 8 instances left one block of 8 warps per SM where 12 warps fit;
// - asking ptxas for a block more (__launch_bounds__'s minimum blocks per SM): on an H100, the
//   softmax of bfloat16 rows of 16384 ran 15 % faster at 3 blocks of 80 registers than at 2 of 128.
// A kernel then left one block of one scope instance per SM, whose work outlasts its tile's load
// (FrameSpec::prefetch_if_alone), is built once more with its register tiles prefetched
// (FrameSpec::prefetch: each round's copied into shared memory during the round before), kept where
// it stays one block per SM without local memory: no other block's loads overlapped its work.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/kernel_cache.h"
#include "backends/cuda/kernel_frame.h"

namespace tp::cuda {

struct BuiltKernel {
  KernelSource source;
  std::string arch;
  std::vector<std::string> options;
  std::shared_ptr<const CompiledKernel> binary;
};

// `frame(max_instances)`: the frame with at most that many scope instances per block (0: the scope's).
BuiltKernel build_frame(const std::function<FrameSpec(int max_instances)>& frame, const std::string& arch);

}  // namespace tp::cuda
