// The CPU backend runs a tile program step by step: each step is the bound plan its standalone
// call would run (same executor, same device template), over host tiles that hold every
// intermediate in logical order, a chunk of the batch at a time so the intermediates stay in
// cache. So each step's bits are the standalone op's, and the program's are those of the
// chain of standalone calls.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "program/program_plan.h"

namespace tp {

// inputs: one per program input ([tiles][tile elements], or one tile when batch_broadcast);
// scalars: the call's run-time scalars; outputs: one per program output ([tiles][tile elements]),
// holding the old values where a step accumulates into one.
void run_program_host(const ProgramPlan& plan, const std::vector<std::uintptr_t>& inputs,
                      const std::vector<double>& scalars, const std::vector<std::uintptr_t>& outputs, long long tiles,
                      const std::function<bool()>& interrupted);

}  // namespace tp
