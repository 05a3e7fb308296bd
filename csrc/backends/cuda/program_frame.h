// What the one kernel frame (kernel_frame.h) runs, made from a plan: a tile program's inputs and
// outputs as the frame's operands and its steps as the body (declarations of the tiles between
// steps, each step's device template called as its standalone kernel calls it, copies, and the
// scope's barrier where a step reads what another thread wrote), and a standalone call as the
// program of one step: its plan's operands and its variant's one call.
//
//   tp_kernel(<one const pointer per program input>, <one pointer per output>, long long tiles)
#pragma once
#include <string>

#include "backends/cuda/kernel_frame.h"
#include "program/program_plan.h"

namespace tp {

// A standalone call: the frame's operands are its plan's, the body its variant's one call.
FrameSpec call_frame(const Plan& plan, KernelBody body);

// A program for `arch`: its launch shape (nothing rendered; ValueError naming the program when
// one instance needs more shared memory than the arch gives a block) and its frame, body and all.
KernelSource program_launch(const ProgramPlan& plan, const std::string& arch);
FrameSpec program_frame(const ProgramPlan& plan, const std::string& arch);

}  // namespace tp
