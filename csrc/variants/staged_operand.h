// Where a variant's operand lives while its body runs, as the frame stages it: a register tile
// placed over the scope's threads, or a shared tile in its layout (row-major where it names none).
#pragma once
#include <string>

#include "dispatch/plan.h"

namespace tp {

// `operand`: the index into call.inputs, -1 the output; `arg` names the layout argument a
// placement error points at ("layout", "out_layout", or the operand's own name).
OperandStaging staged_operand(int operand, const TileRef& t, const ExecScope& scope, bool load, bool store,
                              const std::string& arg);

}  // namespace tp
