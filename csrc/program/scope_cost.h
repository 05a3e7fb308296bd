// The cost model behind the planner's choice of scope (auto_scope.h): an estimate of the time
// one SM of the target spends per row (per instance of the batch) of a planned program, from the
// bytes it moves, how much of the SM's memory bandwidth its resident instances keep busy, and what
// its barriers cost. The figures are not a timing: they rank candidates for one call, and each
// term is in the plan's scope trace so that the choice says why.
//   memory    the bytes an instance reads and writes once, over the SM's share of DRAM bandwidth
//             scaled by occupancy (loads in flight per SM, Little's law); the re-reads of a
//             `streamed` staging come from L2 while the rows in flight fit in it, else from DRAM;
//             a `shared` staging reads its passes from shared memory; `spilled` registers go
//             through local memory
//   lanes     a thread-scope row: each lane's loads touch a line of their own (one L1 wavefront
//             per element)
//   cores     the maps' instructions (a chunked staging's passes recompute those each needs)
//   barriers  each reduction across warps stops the instance's loads for a barrier
//             and combines one partial per warp through shared memory; the other instances
//             resident on the SM hide it (divided by them); at a cluster, one cluster exchange
//             per reduction besides
//   overlap   memory and cores overlap (the larger of the two) where the instance loads all it
//             holds at once, in part where a pass alternates them a chunk at a time, not at all
//             on a cluster's CTA alone on its SM, a share moved through registers, or a CTA alone
//             on its SM whose shared row fills element by element; an instance alone on its SM
//             also waits for its loads to land at each reduction (drains)
// Calibrated to the H200 points of benchmarks/results/h200-auto-scope-points.json
// (tests/test_auto_scope.py: on every shape measured at two or more points, the one the model
// ranks first is within 5 % of the fastest).
#pragma once
#include <string>
#include <vector>

namespace tp {

struct ProgramPlan;

struct ScopeCost {
  double ns_per_row = 0;       // the score: lower is better
  int instances_per_sm = 0;    // resident at once on one SM
  std::vector<std::string> terms;  // each term with its figures, for the plan's trace
};

ScopeCost estimate_cost(const ProgramPlan& plan);

// Whether the program's maps over a row take longer than the row's load at an SM's share of the
// DRAM: then a CTA alone on its SM gains by copying its next row into shared memory as it works on
// this one (the CUDA frame's prefetch, FrameSpec::prefetch_if_alone). On an H200 softmax rows of
// 32000 at cta(512) registers gained 4 % in float32 and 20 % in bfloat16 so; RMSNorm rows of 16384
// in float32, whose maps take a third of the load, lost 3 % at cta(256) and cta(512).
bool maps_outlast_row_load(const ProgramPlan& plan);

}  // namespace tp
