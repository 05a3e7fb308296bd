// A standalone call as the program of one step (DESIGN §4): the call's array operands are the
// program's inputs, its scalar operands run-time scalars (a new value each call, no new plan), its
// result the one output. The planner takes the step's call as it is, so the Plan, the errors and
// the bits are the call's; the backends run it as they run any program.
#include "program/program_plan.h"

namespace tp {

ProgramSpec call_program(const OpCall& call) {
  ProgramSpec spec;
  spec.name = "tp." + call.op();
  spec.scope = call.scope;
  StepSpec step;
  step.op = call.op();
  step.call = call;
  step.name = call.output.arg;
  for (const TileRef& t : call.inputs) {
    step.scalars.push_back(0.0);
    if (t.scalar) {
      step.operands.push_back(-1);
      step.scalar_args.push_back(spec.scalar_args++);
      continue;
    }
    ProgramInput in;
    in.name = t.arg;
    in.dtype = t.dtype;
    in.shape = t.shape;
    step.operands.push_back(static_cast<int>(spec.inputs.size()));
    step.scalar_args.push_back(-1);
    spec.inputs.push_back(in);
  }
  spec.outputs = {static_cast<int>(spec.inputs.size())};
  spec.steps.push_back(std::move(step));
  return spec;
}

}  // namespace tp
