// What the treduce variants share: the plan detail their executors read (the chunk geometry,
// the fold order, who runs which pieces), and how a plan of any of them is made.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "dispatch/plan.h"
#include "dispatch/registry.h"
#include "tileprim/comm/chain.cuh"
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
  // rank one shard (its pieces written straight into the root's dst); chain, every rank all of
  // them at its place in the order.
  std::vector<int> workers;
  std::vector<std::pair<long long, long long>> shards;  // [begin, end) pieces per worker
  std::vector<int> staged;  // ranks whose data reaches a worker only by a staged copy
};

// The chain's plan: its steps besides the rest.
struct ChainPlan : TreducePlan {
  treduce::chain::Layout layout{};
};

// Fills `detail` (then plan.detail) for a treduce call run by `workers` (indices of ranks), each
// with an equal share of the pieces, and the params and numerics every variant reports.
void plan_treduce(Plan& plan, std::shared_ptr<TreducePlan> detail, const std::vector<int>& workers,
                  const std::string& algorithm);

// The ranks in fold order: the root, then the others ascending.
std::vector<int> fold_order(int ranks, int root);

// How the chain cuts the call's tensor into steps (the same on every rank and backend).
treduce::chain::Layout chain_layout(const OpCall& call);

// The element offsets [low, high] of a strided tensor's lowest and highest element, from its
// first one (of a non-empty tensor).
std::pair<long long, long long> element_extent(const std::vector<long long>& shape,
                                               const std::vector<long long>& strides);

// Why a GPU cannot read another's memory directly, or "" when every pair in `ranks` x all can.
std::string missing_peer_access(const OpCall& call, const DispatchContext& ctx, const std::vector<int>& readers);

}  // namespace tp
