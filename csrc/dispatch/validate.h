// The checks every tile-primitive call passes before dispatch: bad input raises ValueError /
// TypeError naming the argument and the rule (DESIGN.md section 2), never a DispatchError.
#pragma once
#include "dispatch/context.h"
#include "dispatch/op_call.h"

namespace tp {

// Normalises call.axes (negative axes, order) and fills defaults; throws on bad input (LimitError
// for a tile past the target's limits, ctx.target's).
void validate_call(OpCall& call, const DispatchContext& ctx);

}  // namespace tp
