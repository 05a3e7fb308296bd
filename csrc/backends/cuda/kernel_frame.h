// The CUDA backend's tile frame: one kernel template, filled from the plan. Every kernel is
//   tp_kernel(<one parameter per call input: a device pointer, or a double for a scalar>,
//             <the output's device pointer>, long long tiles)
// and runs like the specification's demonstration programs: global -> storage scope ->
// primitive -> global. A block holds `instances` scope instances of `threads` threads, each
// taking `rounds` tiles in turn: in round r, instance i of block b runs tile
// b * instances * rounds + r * instances + i. Register operands are staged through shared
// memory (the block copies its run of tiles with 16-byte accesses, then each thread gathers
// its registers by the placement table); shared operands laid out row-major are staged by
// the block too, others get a tile per instance filled by their layout. In between, the
// variant's body: its declarations and one call of its device template on the staged
// operands `in<i>` and `out`.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "dispatch/plan.h"
#include "tileprim/layout.cuh"

namespace tp {

struct KernelBody {
  std::string decls;  // constexpr descriptors, inside namespace tp_gen
  std::string call;   // one statement on this instance's staged operands
  // The call reads its register sources only by index (never as an array), so a large
  // thread's run can be read from global memory as it is used (tp::GlobalRun).
  bool indexes_sources = false;
  // Each slot's result is a function of that slot alone (a map), so a thread's slots may be
  // taken a chunk at a time: the call then covers kBodySlots slots, which the frame declares.
  bool maps_slots = false;
};

struct KernelSource {
  std::string text;
  int threads = 1;    // per scope instance
  int instances = 1;  // scope instances per block
  int rounds = 1;     // tiles each instance takes in turn
  long long shared_bytes = 0;  // per block, at launch: staging, then the warps' run windows
  std::string why;             // why this many instances per block
  int block_threads() const { return threads * instances; }
  int tiles_per_block() const { return instances * rounds; }
};

// Fills the frame for `arch` (its shared-memory limit bounds the instances per block);
// ValueError when one instance needs more shared memory than the arch has.
KernelSource render_kernel(const Plan& plan, const KernelBody& body, const std::string& arch);

// Scope instances per block before shared memory limits them, and why (one per block for a
// CTA that is not whole warps; warpgroup and CTA instances each sync on a named barrier).
std::pair<int, std::string> scope_instances(const ExecScope& scope);

// Declarations of the device descriptors, as the bodies print them.
std::string cuda_mem_layout(const MemLayout& L);

// The barrier of one scope instance (none at thread scope) in a block of `instances`.
std::string cuda_scope_sync(const ExecScope& scope, int instances);

// Shared memory one block may use on an architecture ("sm_90a" -> 227 KiB).
long long max_shared_per_block(const std::string& arch);

}  // namespace tp
