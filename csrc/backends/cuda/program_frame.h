// What the one kernel frame (kernel_frame.h) runs, made from a program's plan (a standalone call is
// the program of one step): its inputs and outputs as the frame's operands and its steps as the
// body (declarations of the tiles between steps, each step's device template called on them,
// copies, and the scope's barrier where a step reads what another thread wrote).
//
//   tp_kernel(<one const pointer per program input>, <one double per run-time scalar>,
//             <one pointer per output>, long long tiles)
#pragma once
#include <string>

#include "backends/cuda/kernel_frame.h"
#include "program/program_plan.h"

namespace tp {

// A program for `arch`: its launch shape (the shape its kernel is built with: the body is rendered,
// not compiled, so that `clamped` says whether the body syncs its instances; ValueError naming the
// program when one instance needs more shared memory than the arch gives a block) and its frame,
// body and all.
KernelSource program_launch(const ProgramPlan& plan, const std::string& arch);
// With max_instances, at most that many scope instances per block (0: as many as the scope takes).
FrameSpec program_frame(const ProgramPlan& plan, const std::string& arch, int max_instances = 0);

}  // namespace tp
