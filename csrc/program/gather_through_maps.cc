// A program rewrite before planning: take_along_axis(cast(x), idx) becomes
// cast(take_along_axis(x, idx)). A cast maps each element alone, so picking first gives the same
// bits (a pick outside the row is NaN either way: a float cast keeps NaN quiet), and the pick then
// reads x itself: where x is a program input it is read where it lies (gather_global), one element
// per pick, instead of the whole widened row staged for it (cross-entropy's logit at its label).
#include <algorithm>

#include "program/program_plan.h"

namespace tp {

namespace {

bool is_float(DType t) { return !is_integer(t); }

// The float-to-float cast of a program input that makes value `id`, which a take may pick through;
// else null.
const StepSpec* float_cast_of(const ProgramSpec& spec, int id) {
  const int inputs = static_cast<int>(spec.inputs.size());
  if (id < inputs) return nullptr;
  const StepSpec& s = spec.steps.at(static_cast<size_t>(id - inputs));
  if (s.op != "cast" || s.call || !s.storage.empty() || s.layout || s.out_layout || !s.dispatch.empty() ||
      s.operands.size() != 1 || s.operands[0] < 0) {
    return nullptr;
  }
  const int src = s.operands[0];  // a program input, which the pick may then read where it lies
  if (src >= inputs || !is_float(spec.inputs.at(static_cast<size_t>(src)).dtype) ||
      !is_float(dtype_from_name(s.dtype, "dtype"))) {
    return nullptr;
  }
  return &s;
}

}  // namespace

ProgramSpec gather_through_maps(const ProgramSpec& spec) {
  const int inputs = static_cast<int>(spec.inputs.size());
  const size_t values = static_cast<size_t>(inputs) + spec.steps.size();
  // the takes that pick through a cast, and what still reads each value once they do
  std::vector<const StepSpec*> through(spec.steps.size(), nullptr);
  std::vector<int> readers(values, 0);
  for (int id : spec.outputs) ++readers.at(static_cast<size_t>(id));
  for (size_t k = 0; k < spec.steps.size(); ++k) {
    const StepSpec& s = spec.steps[k];
    if (s.op == "take_along_axis" && !s.call && s.storage.empty() && !s.layout && !s.out_layout && s.dispatch.empty() &&
        s.operands.size() == 2) {
      through[k] = float_cast_of(spec, s.operands[0]);
    }
    for (size_t i = 0; i < s.operands.size(); ++i) {
      if (s.operands[i] >= 0 && !(i == 0 && through[k])) ++readers.at(static_cast<size_t>(s.operands[i]));
    }
  }
  ProgramSpec out = spec;
  out.steps.clear();
  std::vector<int> id_of(values, -1);  // traced id -> rewritten id
  for (int i = 0; i < inputs; ++i) id_of[static_cast<size_t>(i)] = i;
  auto renumbered = [&](std::vector<int> ids) {
    for (int& id : ids) {
      if (id >= 0) id = id_of.at(static_cast<size_t>(id));
    }
    return ids;
  };
  auto picked_through = [&](size_t k) {  // a cast whose only readers now pick through it: dropped
    return std::find(through.begin(), through.end(), &spec.steps[k]) != through.end() &&
           readers[static_cast<size_t>(inputs) + k] == 0;
  };
  for (size_t k = 0; k < spec.steps.size(); ++k) {
    const StepSpec& s = spec.steps[k];
    if (picked_through(k)) continue;
    StepSpec step = s;
    step.operands = renumbered(s.operands);
    if (const StepSpec* cast = through[k]) {
      StepSpec take = step;
      take.name.clear();
      take.operands[0] = cast->operands[0];  // an input: its id is unchanged
      out.steps.push_back(take);
      StepSpec widened = *cast;
      widened.operands = {inputs + static_cast<int>(out.steps.size()) - 1};
      widened.name = s.name;
      widened.where = s.where;
      step = widened;
    }
    out.steps.push_back(step);
    id_of[static_cast<size_t>(inputs) + k] = inputs + static_cast<int>(out.steps.size()) - 1;
  }
  out.outputs = renumbered(spec.outputs);
  return out;
}

}  // namespace tp
