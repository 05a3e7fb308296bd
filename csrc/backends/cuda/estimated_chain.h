// The chains of an exact program that its GPU kernel estimates (include/tileprim/elementwise/
// estimated.cuh): a float32 value made of products and quotients of register values and of exp,
// exp2, sigmoid or silu of register values, read by nothing but its cast to float16 or bfloat16
// (SwiGLU's cast(silu(a) * b)). The kernel runs the chain's steps with their fast forms, checks
// each slot's estimate against the 16-bit rounding and runs the slots it cannot vouch for exactly;
// the bits are the exact ones (the CPU backend's).
#pragma once
#include <cstddef>
#include <vector>

#include "program/program_plan.h"

namespace tp {

// The registers per thread a kernel with a chain is built for at most (KernelBody::register_target):
// SwiGLU's and GeGLU's take 30-32 unasked, their rare path making its leaves again from the inputs; a
// chain whose leaves must stay live for it (made by no map of the inputs) takes more. Kept so, SwiGLU's
// took 46-52, and ran faster at 40 (12 blocks of 128 threads on an H200, a little spilled: 0.41 ms
// against 0.42-0.47)
constexpr int kChainRegisters = 40;

struct EstimatedChain {
  size_t cast = 0;            // the step that rounds the chain's value to 16 bits
  std::vector<size_t> steps;  // the chain's steps, in program order (the last makes the cast's operand)
  // The maps its rare path runs again before them, in program order: those that make its leaves
  // from the program's inputs (read again from global memory), so that no such leaf stays live
  // across the check for the rare path
  std::vector<size_t> recomputed;
};

// The program's chains: none where it runs in passes over its rows, where a thread holds more than
// 8 slots of the chain's value, or under fastmath=True (whose steps are fast already).
std::vector<EstimatedChain> estimated_chains(const ProgramPlan& plan);

}  // namespace tp
