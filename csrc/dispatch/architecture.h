// GPU architectures, in one place: the target strings dispatch models ("sm_90a"), their
// numbers (90), the target of a device's compute capability, and every limit of an
// architecture that a planner or the kernel frame checks (registers per thread and block,
// shared memory, blocks per SM, how CUDA allots them). Dispatch, the planners, the CUDA backend
// and Python (_C.sm_version, _C.sm_target, _C.target_limits) all ask these.
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
// many blocks of a kernel an SM runs side by side; and what one block and one thread may take.
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
  // CTAs of one thread-block cluster (sm_90 on): the portable most, and the most where the kernel
  // opts in to non-portable sizes; 0: the architecture has no clusters
  int cluster_ctas = 8;
  int cluster_ctas_nonportable = 16;
  // one block, one thread
  int registers_per_block = 65536;
  int registers_per_thread = 255;  // ptxas gives a thread at most this many
  // how CUDA allots them: registers per warp in units of register_unit from one of
  // register_partitions, shared memory in units of shared_unit
  int warp_threads = 32;
  int register_partitions = 4;
  int register_unit = 256;
  long long shared_unit = 128;
  // tileprim's own bound, kept with the hardware's: a GPU kernel whose threads hold more elements
  // of one tile in registers than this is refused (the thread's unrolled code grows until NVRTC
  // takes minutes: a thread-scope softmax of rows of 200 elements 3.4 s, 400 14 s, 1000 11 minutes
  // on 2 cores; and it would run from local memory). A ragged row at a CTA is padded over its
  // threads (ceil(n / threads) each), so only thread-scope rows come near it.
  long long spill_slots = 768;
};
// The limits of `arch`'s SM ("sm_90a", "compute_90"); ValueError for an unknown target.
SmLimits sm_limits(const std::string& arch);
// The limits a plan for `target` is checked against: its SM's; with no target (a plan for the CPU
// backend that models no GPU), the largest any architecture allows, so that such a plan refuses
// nothing some GPU runs.
SmLimits target_limits(const std::string& target);
// A cluster scope on `target`: ValueError naming the target and the rule where its SM has no
// clusters or fewer CTAs per cluster than the scope (no target: any size an architecture runs).
void check_cluster_target(int ctas, const std::string& target);
// Bytes of shared memory as the limits' messages say them: "227 KiB (232448 bytes)".
std::string shared_bytes_str(long long bytes);

}  // namespace tp
