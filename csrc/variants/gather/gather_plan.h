// gather -> gather's plan detail, read by its executors: the tiles' shapes around the axis and
// their memory layouts (tileprim/gather.cuh's GatherView), and whether the op sums (scatter).
#pragma once
#include "dispatch/plan.h"
#include "tileprim/gather.cuh"

namespace tp {

struct GatherPlan : VariantPlan {
  GatherView view{};
  bool scatter = false;  // scatter_add_along_axis; else take_along_axis
};

}  // namespace tp
