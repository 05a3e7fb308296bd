// The checks every tile-primitive call passes before dispatch: bad input raises ValueError /
// TypeError naming the argument and the rule (DESIGN.md section 2), never a DispatchError.
#pragma once
#include "dispatch/context.h"
#include "dispatch/op_call.h"

namespace tp {

// Normalises call.axes (negative axes, order) and fills defaults; throws on bad input (LimitError
// for a tile past the target's limits, ctx.target's).
void validate_call(OpCall& call, const DispatchContext& ctx);

// The result shape of a gather op (take_along_axis: idx's; scatter_add_along_axis: x's) from its
// operands' shapes, with `axes` (one axis) normalised; ValueError naming the operand otherwise.
std::vector<long long> gather_result_shape(const OpDef& def, const std::vector<std::vector<long long>>& shapes,
                                           std::vector<int>& axes);

}  // namespace tp
