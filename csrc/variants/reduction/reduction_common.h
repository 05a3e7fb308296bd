// What the three reduction variants share: the logical split into spatial and reduced dims,
// the operator, the slot-by-slot fold view, their plan details (read by the executors), the
// storage predicate and the numerics text.
#pragma once
#include <string>
#include <vector>

#include "dispatch/op_call.h"
#include "dispatch/plan.h"
#include "dispatch/registry.h"
#include "layout/tile_layout.h"
#include "tileprim/reduction/butterfly.cuh"
#include "tileprim/reduction/shared_groups.cuh"
#include "tileprim/reduction/view.cuh"

namespace tp {

struct ReductionAxes {
  std::vector<long long> src_shape;
  std::vector<bool> reduced;  // per src dim
  long long spatial_len = 1;  // outputs
  long long reduce_len = 1;   // sources per output
  std::vector<long long> dst_shape;  // the src dims not reduced; (1,) when all are
};
ReductionAxes reduction_axes(const OpCall& call);

// The op's reduction descriptor (op table), and the functor the call folds with: its
// NaN-propagating form with propagate_nan=True.
const ReductionOp& reduction_op(const OpCall& call);
const std::string& reduce_functor(const OpCall& call);

// The fold as the device templates take it; slots are register or shared-memory offsets.
using FoldView = ReduceView<kUnrollMemory>;

// Output k folds sources (k, j): src's memory iters of the spatial dims then of the reduced
// dims, against dst's memory iters. src_dims / dst_dims come from TileLayout::group; the
// memory offset and swizzle come from the layouts. Declines when the per-thread output
// counts of src and dst differ or the iters do not fit the descriptor.
FoldView fold_view(const TileLayout& src, const std::vector<DimIters>& src_dims, const std::vector<bool>& reduced,
                   const TileLayout& dst, const std::vector<DimIters>& dst_dims);

// ---- the variants' plan details --------------------------------------------------------
struct LocalPlan : VariantPlan {
  bool thread_wise = true;  // one thread folds its own registers; else lanes fold, then shuffle
  FoldView view{};
  ShuffleMasks masks{0, {}, 32};
};

struct SharedPlan : VariantPlan {
  bool thread_wise = false;  // thread scope: the thread-wise loop on shared memory
  FoldView view{};
  GroupShape groups{1, 1, {0, {}, 1}};
};

struct PackedPlan : VariantPlan {
  FoldView view{};
};

// The predicate that a variant's source and destination are in the storage it works on.
Predicate storage_predicate(bool shared);

// Stages src and dst for the frame: registers by their placements, or shared tiles by their
// memory layouts; dst is loaded only when the call accumulates.
void stage_registers(Plan& plan, const TileLayout& src, const TileLayout& dst);
void stage_shared(Plan& plan, const TileLayout& src, const TileLayout& dst);

// Numerics entries every reduction plan carries (identity, NaN rule, accumulation dtype).
void note_reduction_numerics(Plan& plan);

}  // namespace tp
