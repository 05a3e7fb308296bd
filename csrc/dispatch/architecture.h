// GPU architectures, in one place: the target strings dispatch models ("sm_90a"), their
// numbers (90), and the target of a device's compute capability. Dispatch, the CUDA backend,
// the kernel frame and Python (_C.sm_version, _C.sm_target) all ask these.
#pragma once
#include <string>
#include <vector>

namespace tp {

// The targets dispatch models, oldest first.
const std::vector<std::string>& known_targets();

// "sm_90a" -> 90, "compute_90" -> 90 (an NVRTC PTX target), "" -> 0 (no architecture);
// ValueError naming `target` and listing the known targets otherwise.
int sm_version(const std::string& target);

// The target of a device of compute capability `cc` (major * 10 + minor): sm_XX, with the
// 'a' suffix where the arch-specific features live (wgmma, tcgen05: sm_90a, sm_100a, sm_103a).
std::string sm_target(int cc);

// The most shared memory any architecture gives one block (sm_90, sm_100: 227 KiB), which
// plans check against before a target is known; the frame checks its own arch's.
constexpr long long kMaxSharedBytes = 227 * 1024;

// What one streaming multiprocessor of an architecture holds at once (the CUDA programming
// guide's table per compute capability): the limits under which CUDA's occupancy rules say how
// many blocks of a kernel an SM runs side by side.
struct SmLimits {
  int registers = 65536;  // 32-bit registers, in four partitions, taken 256 per warp at a time
  int threads = 2048;
  int blocks = 32;
  long long shared = 228 * 1024;  // at the largest shared-memory carveout
  long long shared_per_block = kMaxSharedBytes;
  long long shared_reserved_per_block = 1024;  // CUDA's own, beside each block's
  // named barriers the SM holds for its blocks together (each block takes EIATTR_NUM_BARRIERS of
  // them), from sm_90 on; 0: not a limit
  int barriers = 64;
};
// The limits of `arch`'s SM ("sm_90a", "compute_90"); ValueError for an unknown target.
SmLimits sm_limits(const std::string& arch);

}  // namespace tp
