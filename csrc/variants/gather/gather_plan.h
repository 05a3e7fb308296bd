// gather -> gather's (and gather_global's) plan detail, read by its executors: the tiles' shapes around the axis and
// their memory layouts (tileprim/gather.cuh's GatherView), whether the op sums (scatter), and the
// wide side's register placement where it lies in registers (take's x, scatter's result).
#pragma once
#include <memory>

#include "dispatch/plan.h"
#include "tileprim/gather.cuh"

namespace tp {

struct GatherPlan : VariantPlan {
  GatherView view{};
  bool scatter = false;  // scatter_add_along_axis; else take_along_axis
  std::shared_ptr<const RegisterPlacement> held;  // the wide side in registers, or null: in shared memory
  bool global_source = false;  // gather_global: x read where it lies in global memory; idx and out replicated
  bool held_picks = false;  // scatter_held: idx and src in registers, every thread holding each element
};

// Whether `t` lies in registers with every thread of `scope` holding element k in slot k (a value
// per row replicated over the scope's threads): each thread reads it with no exchange.
bool replicated(const TileRef& t, const ExecScope& scope);

// The call's tiles around its axis and their memory layouts (row-major where not in shared memory).
GatherView gather_view(const OpCall& call);

// gather_view of the plan's call, with its axis, extent and picks set as the plan's parameters
// (every gather variant's plan states them alike).
GatherView viewed(Plan& plan);

}  // namespace tp
