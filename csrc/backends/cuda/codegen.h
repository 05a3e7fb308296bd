// Plan -> one CUDA translation unit. Every kernel has the same signature
//   tp_kernel(const void* in0, const void* in1, const void* in2, void* out,
//             double s0, double s1, double s2, long long tiles)
// (unused operands are null; scalar operands arrive in s0..s2) and the same frame: the block
// holds `instances` scope instances of `threads` threads; instance i of block b runs tile
// b * instances + i, like the seeds' demonstration programs: global -> storage scope ->
// primitive -> global. A variant's emit_cuda writes the declarations and the body.
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

struct KernelSource {
  std::string comment;              // what the kernel is (the call)
  bool uses_fp16 = false, uses_bf16 = false;
  int threads = 1;                  // per scope instance
  int instances = 1;                // scope instances per block
  long long shared_bytes = 0;       // dynamic shared memory per instance
  std::ostringstream decls;         // namespace tp_gen { ... }
  std::ostringstream body;          // inside the kernel, after the frame
  std::set<std::string> tables;     // int tables already declared

  void use(DType t);                // notes the headers a dtype needs
  int block_threads() const { return threads * instances; }
  std::string source() const;       // the whole translation unit
};

// Chooses instances per block for a scope (and its shared memory per instance).
void frame_for(const ExecScope& scope, long long shared_bytes, KernelSource& k);

// Declarations and statements the variants share. Names: `in<i>` / `out` point at this
// instance's tile, `lane` is the thread's index in its instance.
std::string cuda_int_table(const std::string& name, const std::vector<int>& values);
// Declares the table once per kernel, however many operands read it.
void declare_table(KernelSource& k, const std::string& name, const std::vector<int>& values);
std::string cuda_mem_layout(const MemLayout& L);
// Declares `T var[slots]` holding input `input`'s tile as `p` places it (NaN where empty).
void emit_load_registers(KernelSource& k, const std::string& var, DType t, const RegisterPlacement& p,
                         const std::string& table, const std::string& from);
// Writes each element `p` gives this thread to write.
void emit_store_registers(KernelSource& k, const std::string& var, const RegisterPlacement& p,
                          const std::string& table, const std::string& to);
// Cooperative copy between a global tile and a shared tile laid out by `L`.
void emit_copy_to_shared(KernelSource& k, const std::string& smem, const std::string& from,
                         const std::string& layout, long long elements);
void emit_copy_from_shared(KernelSource& k, const std::string& smem, const std::string& to,
                           const std::string& layout, long long elements);
// The scope's barrier (none at thread scope).
std::string cuda_scope_sync(const ExecScope& scope);

}  // namespace tp
