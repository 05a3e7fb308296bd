// The CUDA frame of a tile program: ONE kernel per program. A host-side launch shape (scope
// instances per block, each instance's shared memory: the program's tiles by live range plus a
// scratch area where a copy moves register tiles between threads) and the generated source:
// declarations (each step's descriptors, each tile's placement), then per instance: the inputs
// staged once where their first reader wants them, one call of each step's device template (the
// same call a standalone kernel makes, executors.cc) with the scope's barrier where a step reads
// or writes shared memory, and the outputs stored once.
//
//   tp_kernel(<one const pointer per program input>, <one pointer per output>, long long tiles)
//
// Block b's instance i runs tile b * instances + i; an input the whole batch shares is one tile.
#pragma once
#include <string>

#include "program/program_plan.h"

namespace tp {

struct ProgramLaunch {
  int threads = 1;                  // per scope instance
  int instances = 1;                // scope instances per block
  long long tile_bytes = 0;         // per instance: the program's shared tiles, reused by live range
  long long scratch_bytes = 0;      // per instance: where register tiles cross threads in a copy
  std::string why;                  // why this many instances per block
  long long instance_bytes() const { return tile_bytes + scratch_bytes; }
  long long shared_bytes() const { return instances * instance_bytes(); }
  int block_threads() const { return threads * instances; }
};

// The launch shape for `arch`; ValueError naming the program when one instance needs more
// shared memory than the arch gives a block.
ProgramLaunch program_launch(const ProgramPlan& plan, const std::string& arch);

struct ProgramSource {
  std::string text;
  ProgramLaunch launch;
};

ProgramSource render_program(const ProgramPlan& plan, const std::string& arch);

}  // namespace tp
