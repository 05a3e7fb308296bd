// A program rewrite before planning: a step that gives the same bits before a cast as after it
// runs before it, on the cast's source, and the cast follows.
// - take_along_axis(cast(x), idx) -> cast(take_along_axis(x, idx)), x a float program input, the
//   cast to a float dtype. A cast maps each element alone, so picking first gives the same bits (a
//   pick outside the row is NaN either way: a float cast keeps NaN quiet), and the pick then reads
//   x itself where it lies (gather_global), one element per pick, instead of the whole widened row
//   staged for it (cross-entropy's logit at its label).
// - max(cast(x)) and min(cast(x)) -> cast(max(x)), cast(min(x)), the cast widening float16 or
//   bfloat16 exactly (to float32 or float64): the order of the values and of +-0 is the same in
//   both dtypes, so the same element wins (a row of NaNs gives NaN either way, counted alike), and
//   the GPU folds the 16-bit registers two to an instruction, with no widening of each first
//   (softmax's and logsumexp's max of a bfloat16 row in float32).
#include <algorithm>

#include "program/program_plan.h"

namespace tp {

namespace {

bool is_float(DType t) { return !is_integer(t); }

// A step as the user wrote it, with nothing placed by hand
bool unplaced(const StepSpec& s) {
  return !s.call && s.storage.empty() && !s.layout && !s.out_layout && s.dispatch.empty();
}

// The dtype of value `id`: an input's, a cast's, else its first tile operand's (the trace's rule)
DType dtype_of(const ProgramSpec& spec, int id) {
  const int inputs = static_cast<int>(spec.inputs.size());
  if (id < inputs) return spec.inputs.at(static_cast<size_t>(id)).dtype;
  const StepSpec& s = spec.steps.at(static_cast<size_t>(id - inputs));
  if (s.op == "cast") return dtype_from_name(s.dtype, "dtype");
  return dtype_of(spec, *std::find_if(s.operands.begin(), s.operands.end(), [](int u) { return u >= 0; }));
}

// The cast that makes value `id`, where `step` may run before it: for a take, a float program
// input's cast to a float dtype (the pick then reads the input where it lies); for max and min,
// a 16-bit float's exact widening. Else null.
const StepSpec* cast_before(const ProgramSpec& spec, const StepSpec& step, int id) {
  const int inputs = static_cast<int>(spec.inputs.size());
  if (id < inputs) return nullptr;
  const StepSpec& s = spec.steps.at(static_cast<size_t>(id - inputs));
  if (s.op != "cast" || !unplaced(s) || s.operands.size() != 1 || s.operands[0] < 0) return nullptr;
  const DType from = dtype_of(spec, s.operands[0]), to = dtype_from_name(s.dtype, "dtype");
  if (step.op == "take_along_axis") {
    return s.operands[0] < inputs && is_float(from) && is_float(to) ? &s : nullptr;
  }
  return is_16bit_float(from) && (to == DType::float32 || to == DType::float64) ? &s : nullptr;
}

// The cast that step s runs before, else null
const StepSpec* runs_before(const ProgramSpec& spec, const StepSpec& s, bool reductions) {
  if (!unplaced(s) || s.operands.empty() || s.operands[0] < 0) return nullptr;
  const bool take = s.op == "take_along_axis" && s.operands.size() == 2;
  const bool order = reductions && (s.op == "max" || s.op == "min") && s.operands.size() == 1;
  return take || order ? cast_before(spec, s, s.operands[0]) : nullptr;
}

}  // namespace

ProgramSpec steps_before_casts(const ProgramSpec& spec, bool reductions) {
  const int inputs = static_cast<int>(spec.inputs.size());
  const size_t values = static_cast<size_t>(inputs) + spec.steps.size();
  // the steps that run before a cast, and what still reads each value once they do
  std::vector<const StepSpec*> through(spec.steps.size(), nullptr);
  std::vector<int> readers(values, 0);
  for (int id : spec.outputs) ++readers.at(static_cast<size_t>(id));
  for (size_t k = 0; k < spec.steps.size(); ++k) {
    const StepSpec& s = spec.steps[k];
    through[k] = runs_before(spec, s, reductions);
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
  auto run_before = [&](size_t k) {  // a cast whose only readers now run before it: dropped
    return std::find(through.begin(), through.end(), &spec.steps[k]) != through.end() &&
           readers[static_cast<size_t>(inputs) + k] == 0;
  };
  for (size_t k = 0; k < spec.steps.size(); ++k) {
    const StepSpec& s = spec.steps[k];
    if (run_before(k)) continue;
    StepSpec step = s;
    step.operands = renumbered(s.operands);
    if (const StepSpec* cast = through[k]) {
      StepSpec first = step;
      first.name.clear();
      first.operands[0] = renumbered({cast->operands[0]})[0];
      out.steps.push_back(first);
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
