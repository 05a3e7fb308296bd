// What the treduce variants share: the plan detail their executors read (the chunk geometry,
// the fold order, who runs which pieces), and how a plan of either is made.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "dispatch/plan.h"
#include "dispatch/registry.h"
#include "tileprim/comm/treduce.cuh"
#include "variants/reduction/reduction_common.h"

namespace tp {

struct TreducePlan : VariantPlan {
  treduce::Geometry geometry{};
  std::vector<int> order;    // ranks in fold order: the root, then the others ascending
  std::string functor;       // the op's reduction functor (op table)
  DType dtype = DType::float32;
  DType accumulate = DType::float32;  // the dtype the fold runs in
  bool pingpong = false;
  // Who reduces which pieces: root_pull, the root all of them; scatter_gather, each non-root
  // rank one shard (its pieces written straight into the root's dst).
  std::vector<int> workers;
  std::vector<std::pair<long long, long long>> shards;  // [begin, end) pieces per worker
  std::vector<int> staged;  // ranks whose data reaches a worker only by a staged copy
};

// Fills the plan for a treduce call run by `workers` (indices of ranks), each with an equal
// share of the pieces, and the params and numerics both variants report.
void plan_treduce(Plan& plan, const std::vector<int>& workers, const std::string& algorithm);

// The element offsets [low, high] of a strided tensor's lowest and highest element, from its
// first one (of a non-empty tensor).
std::pair<long long, long long> element_extent(const std::vector<long long>& shape,
                                               const std::vector<long long>& strides);

// Why a GPU cannot read another's memory directly, or "" when every pair in `ranks` x all can.
std::string missing_peer_access(const OpCall& call, const DispatchContext& ctx, const std::vector<int>& readers);

}  // namespace tp
