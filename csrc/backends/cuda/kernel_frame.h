// The CUDA backend's one kernel frame. Every tile kernel, a standalone call's and a tile
// program's alike, is this frame around a body:
//   tp_kernel(<one parameter per kernel input: a device pointer, or a double for a scalar>,
//             <one device pointer per output>, long long tiles)
// and runs like the specification's demonstration programs: global -> storage scope -> the
// body's steps -> global. Its launch shape (launch_shape.h) says how a block takes its tiles and
// how each operand is staged; the source renders that shape as declarations (the shape's
// constants, each operand's placement, tables and layout) and calls of the frame's device
// templates (tileprim/frame.cuh: tp::BlockRun's parts and rounds, tp::BlockTiles, the placements'
// loads, gathers and stores, the run views), never as loops of its own. In between, the body:
// declarations and statements on the staged operands, by name (in0, ..., out, out1, ...). A
// standalone call's body is one call of its variant's device template (a program of one step);
// a program's is one such call per step with the scope's barrier where a step's output crosses
// threads.
#pragma once
#include <string>

#include "backends/cuda/launch_shape.h"
#include "backends/cuda/place_types.h"

namespace tp {

// The frame's one __global__ function, by name (extern "C").
constexpr const char* kKernelName = "tp_kernel";

// The launch shape and the source.
struct KernelSource : LaunchShape {
  std::string text;
  std::string function = kKernelName;  // its __global__ function
  int min_blocks = 0;          // the blocks per SM ptxas was asked to fit (__launch_bounds__), 0: none
};

// The launch shape for `arch` (its shared-memory limit bounds the instances per block), with no
// text: the host-side value, made and checked without a GPU or a compiler; the body's text may
// follow from it (a program's barriers name the instances). ValueError when one instance needs
// more shared memory than the arch has.
KernelSource frame_launch(const FrameSpec& spec, const std::string& arch);
// The same, and the kernel's source; with `min_blocks`, ptxas asked to fit that many blocks per SM.
KernelSource render_kernel(const FrameSpec& spec, const std::string& arch, int min_blocks = 0);

// Declarations of the device descriptors, as the bodies print them.
std::string cuda_mem_layout(const MemLayout& L);
// A register array's declaration, `T name[slots]`: 2-byte elements aligned as pairs (an estimated
// chain's results are written two to a word, tileprim/elementwise/estimated.cuh)
std::string register_array(DType dtype, const std::string& name, long long slots);

// The barrier of one scope instance (none at thread scope) in a block of `instances`.
std::string cuda_scope_sync(const ExecScope& scope, int instances);

}  // namespace tp
