// What the three reduction variants share: the logical split into spatial and reduced dims,
// the operator, the slot-by-slot fold view, and the numerics text.
#pragma once
#include <string>
#include <vector>

#include "dispatch/op_call.h"
#include "dispatch/plan.h"
#include "layout/tile_layout.h"
#include "tileprim/reduction/butterfly.cuh"
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

enum class ReduceKind { sum, max, min, max_nan, min_nan };
ReduceKind reduce_kind(const OpCall& call);  // max/min with propagate_nan=True -> *_nan
const char* reduce_op_cuda(ReduceKind k);    // "tp::reduce_op::Sum", ...

using HostReduceView = ReduceView<kUnrollMemory>;

// Output k folds sources (k, j): src's memory iters of the spatial dims then of the reduced
// dims, against dst's memory iters. src_dims / dst_dims come from TileLayout::group; the
// memory offset and swizzle come from the layouts. Declines when the per-thread output
// counts of src and dst differ or the iters do not fit the descriptor.
HostReduceView fold_view(const TileLayout& src, const std::vector<DimIters>& src_dims,
                         const std::vector<bool>& reduced, const TileLayout& dst,
                         const std::vector<DimIters>& dst_dims);

// Numerics entries every reduction plan carries (identity, NaN rule, accumulation dtype).
void note_reduction_numerics(Plan& plan);

// The view as a constexpr declaration of a generated kernel.
std::string reduce_view_cuda(const std::string& name, const HostReduceView& v, const char* unroll);
std::string shuffle_masks_cuda(const std::string& name, const ShuffleMasks& sh);

}  // namespace tp
