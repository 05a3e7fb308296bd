// Plan -> one CUDA translation unit. Every kernel has the same signature
//   tp_kernel(const void* in0, const void* in1, const void* in2, void* out,
//             double s0, double s1, double s2, long long tiles)
// (unused operands are null; scalar operands arrive in s0..s2) and the same frame: the block
// holds `instances` scope instances of `threads` threads; instance i of block b runs tile
// b * instances + i, like the seeds' demonstration programs: global -> storage scope ->
// primitive -> global. Register tiles are staged through shared memory: the block copies
// its contiguous run of tiles in and out with 16-byte accesses, and each thread gathers its
// registers from there. A variant's emit_cuda writes the declarations and the body.
#pragma once
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dispatch/dtype.h"
#include "dispatch/plan.h"
#include "layout/placement.h"
#include "tileprim/layout.cuh"

namespace tp {

// A global operand the block copies to shared memory before the body (load) and/or back
// after it (store).
struct StagedOperand {
  std::string param;  // in0_, in1_, in2_ or out_
  DType dtype;
  long long elements;  // per tile
  bool load = false, store = false;
};

class KernelSource {
 public:
  std::string comment;        // what the kernel is (the call)
  int threads = 1;            // per scope instance
  long long variant_shared = 0;  // the variant's own shared memory per instance
  std::ostringstream decls;   // namespace tp_gen { ... }
  std::ostringstream body;    // runs one scope instance on tile `tile`

  void use(DType t);
  // The shared-memory copy of a global operand; returns the name the body reads it by.
  std::string stage(const std::string& param, DType t, long long elements, bool load, bool store);
  // Declares an int table once per kernel, however many operands read it.
  void declare_table(const std::string& name, const std::vector<int>& values);

  // Fixes instances per block and shared memory; then the frame's numbers are final.
  void finish(int default_instances);
  int instances() const { return instances_; }
  int block_threads() const { return threads * instances_; }
  long long shared_bytes() const;  // per block
  std::string source() const;      // the whole translation unit (after finish)

 private:
  long long staging_bytes(int instances) const;
  bool uses_fp16_ = false, uses_bf16_ = false;
  std::vector<StagedOperand> staged_;
  std::set<std::string> tables_;
  int instances_ = 1;
};

// Sets threads and the variant's shared memory for the exec scope; finish() picks instances.
void frame_for(const ExecScope& scope, long long variant_shared_bytes, KernelSource& k);
// Instances per block before shared memory limits them: 128 threads, 4 warps, 1 warpgroup or CTA.
int default_instances(const ExecScope& scope);

std::string cuda_int_table(const std::string& name, const std::vector<int>& values);
std::string cuda_mem_layout(const MemLayout& L);
// Declares `T var[slots]` holding the operand's tile as `p` places it (NaN where empty).
void emit_load_registers(KernelSource& k, const std::string& var, DType t, const RegisterPlacement& p,
                         const std::string& table, const std::string& param, long long elements);
// Writes each element `p` gives this thread to write into the output. With several threads
// per instance it first waits at the scope's barrier: with accum, threads that hold a copy
// of an output read its old value from the same staging slot its owner now overwrites.
void emit_store_registers(KernelSource& k, const std::string& var, DType t, const RegisterPlacement& p,
                          const std::string& table, long long elements, const ExecScope& scope);
// Cooperative copy, by one instance's threads, between its global tile and a shared tile
// laid out by `layout` (the shared reduction's staging, whose layout the tile keeps).
void emit_copy_to_shared(KernelSource& k, const std::string& smem, const std::string& from,
                         const std::string& layout, long long elements);
void emit_copy_from_shared(KernelSource& k, const std::string& smem, const std::string& to,
                           const std::string& layout, long long elements);
// The scope's barrier (none at thread scope).
std::string cuda_scope_sync(const ExecScope& scope);

}  // namespace tp
