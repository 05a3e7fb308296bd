#include "program/row_staging.h"

#include <algorithm>
#include <optional>

#include "dispatch/architecture.h"
#include "errors.h"
#include "layout/placement.h"
#include "program/program_plan.h"

namespace tp {

namespace {

constexpr int kChunkSlotsTarget = 16;  // registers per thread per row tile and chunk

std::string registers_held(const ProgramPlan& plan) {
  return "the tiles live at once take " + std::to_string(plan.peak_registers) + " registers per thread";
}
std::string budget_of(const ProgramPlan& plan) {
  const SmLimits limits = target_limits(plan.context.target);
  return "a thread of scope " + plan.scope.str() + " holds at most " + std::to_string(plan.register_budget()) + " (" +
         std::to_string(limits.registers_per_block) + " per block, " + std::to_string(limits.registers_per_thread) +
         " per thread" + (plan.scope.ctas > 1 ? "; a cluster's limits are each CTA's" : "") + ")";
}
bool fits_registers(const ProgramPlan& plan) { return plan.peak_registers <= plan.register_budget(); }

// The largest tile in registers (the rows, where the program has them), or none
const ProgramValue* widest_in_registers(const ProgramPlan& plan) {
  const ProgramValue* widest = nullptr;
  for (const ProgramValue& v : plan.values) {
    if (v.in_registers() && (!widest || v.elements() > widest->elements())) widest = &v;
  }
  return widest;
}

std::string described(const ProgramValue& v) { return v.name + " " + dtype_name(v.dtype) + shape_str(v.shape); }

// Whether the program can run in passes over chunks of its rows, and how: every tile is a row
// (one shape, one register placement in closed form) or one value every thread reads where it
// lies; maps
// take rows to rows or such values to such values; copies broadcast such a value over a row;
// reductions fold a whole row, each lane its slots in order; a scatter of such values makes a row.
// Reasons either way.
std::optional<RowChunks> row_chunks(const ProgramPlan& plan, std::vector<std::string>& why) {
  if (plan.frame_stages_every_tile()) {
    why.push_back("one step on the program's inputs and output: the kernel frame stages its operands itself");
    return std::nullopt;
  }
  if (plan.scope.threads == 1) {
    why.push_back("at thread scope a row is one thread's: there are no rows spread over threads to take a chunk "
                  "at a time");
    return std::nullopt;
  }
  const ProgramValue* row = widest_in_registers(plan);
  if (!row || row->elements() == 1) {
    why.push_back("no tile is a row of more than one element");
    return std::nullopt;
  }
  auto is_row = [&](const ProgramValue& v) {
    return v.in_registers() && v.shape == row->shape && *v.layout == *row->layout;
  };
  // one value every thread reads where it is: in its own registers, or an input's one element in
  // shared memory (staged by the kernel before the passes)
  auto is_one = [&](const ProgramValue& v) {
    return v.elements() == 1 && (v.held_by_every_lane(plan.scope) || (v.input >= 0 && is_shared(v.storage)));
  };
  for (const ProgramValue& v : plan.values) {
    if (!v.layout) continue;
    if (is_shared(v.storage) && !is_one(v)) {
      why.push_back(described(v) + " is a shared tile: the passes hold the rows in registers");
      return std::nullopt;
    }
    if (!is_row(v) && !is_one(v)) {
      why.push_back(described(v) + " " + v.placement() + " is neither a row (" + shape_str(row->shape) + " " +
                    row->placement() + ") nor one value that every thread holds");
      return std::nullopt;
    }
  }
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    const ProgramStep& s = plan.steps[k];
    const ProgramValue& result = plan.values.at(s.result);
    const std::string step = "step " + std::to_string(k) + " (" + s.op + " -> " + result.name + ")";
    const Plan& p = s.bound->plan();
    std::vector<const ProgramValue*> operands;  // those the passes hold (not an input read where it lies)
    for (size_t i = 0; i < s.operands.size(); ++i) {
      const int id = s.operands[i];
      if (id >= 0 && p.call.inputs.at(i).storage != Storage::global) operands.push_back(&plan.values.at(id));
    }
    if (s.op == "copy") {
      if (!is_one(*operands.front()) || !is_row(result)) {
        why.push_back(step + " moves a row between placements; the passes only broadcast one value over a row");
        return std::nullopt;
      }
    } else if (p.variant == "scatter_held") {  // one value per row into a row: a chunk's slots from their elements
      if (!is_row(result) || !is_one(plan.values.at(s.operands[1])) || !is_one(plan.values.at(s.operands[2]))) {
        why.push_back(step + " scatters into a tile that is not a row");
        return std::nullopt;
      }
    } else if (p.call.def->family == OpFamily::reduction) {
      bool in_order = false;
      for (const auto& [key, value] : p.params) {
        if (key == "lane_folds_in_slot_order") in_order = std::get<bool>(value);
      }
      if (!is_row(*operands.front()) || !is_one(result) || !in_order || p.call.accum) {
        why.push_back(step + " [" + p.variant + "] does not fold a whole row with each lane's slots in order, "
                      "which a pass must take a chunk at a time");
        return std::nullopt;
      }
    } else {
      const bool rows = is_row(result), ones = is_one(result);
      for (const ProgramValue* o : operands) {
        if (!(rows ? is_row(*o) : ones && is_one(*o))) {
          why.push_back(step + " mixes rows and other tiles");
          return std::nullopt;
        }
      }
    }
  }
  for (int id : plan.outputs) {
    if (plan.values.at(id).input >= 0) {
      why.push_back("the program returns its input " + plan.values.at(id).name + " as it is");
      return std::nullopt;
    }
  }
  const std::shared_ptr<const RegisterPlacement> place = place_in_registers(*row->layout, plan.scope, row->name);
  const RunForm& form = place->run;
  const int owners = form.owners, vec = form.vec;
  if (owners == 0) {
    why.push_back("the rows' placement " + row->layout->str() + " has no closed form to take a chunk of");
    return std::nullopt;
  }
  RowChunks rows;
  rows.shape = row->shape;
  rows.slots = place->slots;
  rows.owners = owners;
  rows.vec = vec;
  rows.padded = form.padded_elements;
  rows.chunk_slots = vec;  // the most slots up to the target that are whole runs and divide the row
  for (int c = vec; c <= std::max(vec, kChunkSlotsTarget); c += vec) {
    if (rows.slots % c == 0) rows.chunk_slots = c;
  }
  const int passes = passes_of(plan);
  why.push_back("every row " + shape_str(rows.shape) + " lies as " + row->layout->str() + ": " +
                std::to_string(passes) + " passes (one per reduction, then the outputs), each over " +
                std::to_string(rows.chunks()) + (rows.chunks() == 1 ? " chunk of " : " chunks of ") + std::to_string(rows.chunk_elements()) + " elements (" +
                std::to_string(rows.chunk_slots) + " registers per thread and row tile)");
  return rows;
}

FrameSharedBytes& frame_measure() {
  static FrameSharedBytes measure = nullptr;
  return measure;
}

// An accepted staging whose kernel needs more shared memory than the target has declines, with the
// kernel builder's reason; else its reasons say what the kernel takes.
void check_frame(ProgramPlan& plan, StagingVerdict& v, const std::optional<RowChunks>& rows) {
  if (!v.accepted || !frame_measure()) return;
  ProgramPlan staged = plan;
  staged.staging = v.name;
  staged.rows = v.name == "shared" || v.name == "streamed" ? rows : std::nullopt;
  try {
    const long long bytes = frame_measure()(staged);
    v.reasons.push_back("the kernel takes " + std::to_string(bytes) + " bytes of shared memory per block");
  } catch (const ValueError& e) {
    v.accepted = false;
    v.reasons.push_back(e.what());
  }
}

}  // namespace

void set_frame_shared_bytes(FrameSharedBytes measure) { frame_measure() = measure; }

int passes_of(const ProgramPlan& plan) {
  int passes = 1;
  for (const ProgramStep& s : plan.steps) passes += s.bound->plan().call.def->family == OpFamily::reduction ? 1 : 0;
  return passes;
}

bool staged_row_input(const ProgramValue& v, const RowChunks& rows) {
  return v.input >= 0 && !v.batch_broadcast && v.shape == rows.shape && v.layout;
}

long long share_bytes(const ProgramPlan& plan, const RowChunks& rows, const ProgramValue& v) {
  return (static_cast<long long>(rows.slots) * plan.scope.cta_threads() * dtype_size(v.dtype) + 15) / 16 * 16;
}

long long row_input_bytes(const ProgramPlan& plan, const RowChunks& rows) {
  long long bytes = 0;
  for (const ProgramValue& v : plan.values) {
    if (!staged_row_input(v, rows)) continue;
    bytes += plan.scope.ctas > 1 ? share_bytes(plan, rows, v) : (v.elements() * dtype_size(v.dtype) + 15) / 16 * 16;
  }
  return bytes;
}

const std::vector<std::string>& staging_names() {
  static const std::vector<std::string> names = {"registers", "shared", "streamed", "spilled"};
  return names;
}

void choose_staging(ProgramPlan& plan, const std::string& forced) {
  const std::vector<std::string>& names = staging_names();
  if (!forced.empty() && std::find(names.begin(), names.end(), forced) == names.end()) {
    throw ValueError("staging: '" + forced + "' is not one of registers, shared, streamed, spilled");
  }
  std::vector<StagingVerdict> verdicts(names.size());
  for (size_t i = 0; i < names.size(); ++i) verdicts[i].name = names[i];
  StagingVerdict &registers = verdicts[0], &shared = verdicts[1], &streamed = verdicts[2], &spilled = verdicts[3];

  const bool frame_stages = plan.frame_stages_every_tile();
  registers.accepted = frame_stages || fits_registers(plan);
  registers.reasons.push_back(
      frame_stages ? "one step on the program's inputs and output: no tile lives between steps, and the kernel frame "
                     "stages the step's operands as it stages any (a map a chunk of registers at a time, a long run "
                     "read as it is folded)"
      : registers.accepted ? registers_held(plan) + ", within the " + std::to_string(plan.register_budget()) +
                                 " a thread of scope " + plan.scope.str() + " holds"
                           : registers_held(plan) + "; " + budget_of(plan));

  std::vector<std::string> why;
  const std::optional<RowChunks> rows = row_chunks(plan, why);
  streamed.accepted = rows.has_value();
  streamed.reasons = why;
  if (rows) {
    streamed.reasons.push_back("each pass re-reads the row inputs from global memory (L2 serves the re-reads while "
                               "the rows in flight fit in it)");
    const long long bytes = row_input_bytes(plan, *rows);
    // a cluster's CTA keeps its lanes' exchange buffers beside (tp::ClusterLanes: three values of at
    // most 8 bytes per thread)
    const long long limit =
        target_limits(plan.context.target).shared_per_block - (plan.scope.ctas > 1 ? 3 * 8 * plan.scope.cta_threads() : 0);
    shared.reasons = why;
    if (passes_of(plan) == 1) {
      shared.reasons.push_back("one pass reads each row once: staging it first buys nothing");
    } else {
      shared.accepted = bytes <= limit;
      const std::string per = plan.scope.ctas > 1 ? " bytes of shared memory per CTA (each CTA of the cluster stages "
                                                    "its own lanes' slots)"
                                                  : " bytes of shared memory per instance";
      shared.reasons.push_back("the row inputs take " + std::to_string(bytes) + per +
                               (shared.accepted ? ": staged once, each pass reads them there"
                                                : "; a block has at most " + shared_bytes_str(limit)));
    }
  } else {
    shared.reasons = why;
  }

  const std::string fix = "Fix: fewer elements per thread (a wider scope, more batch_dims), or storage='shared' for the "
                          "steps whose tiles need not stay in registers";
  const bool for_gpu = plan.context.backend == "cuda" || !plan.context.target.empty();
  const long long spill_slots = target_limits(plan.context.target).spill_slots;
  const bool unbuildable = for_gpu && plan.widest_thread_slots > spill_slots;
  spilled.accepted = !fits_registers(plan) && !frame_stages && !unbuildable;
  spilled.reasons.push_back(
      frame_stages            ? "the kernel frame stages the one step's operands"
      : fits_registers(plan)  ? "the tiles fit in registers"
      : unbuildable           ? "a thread holds " + std::to_string(plan.widest_thread_slots) +
                                  " elements of one tile in registers: past " + std::to_string(spill_slots) +
                                  " its kernel unrolls until NVRTC takes minutes to compile it, and it would run from "
                                  "local memory. " + fix
                              : registers_held(plan) + "; " + budget_of(plan) +
                                  ", so on a GPU the rest spill to local memory, slowly. " + fix);

  if (for_gpu) {
    for (StagingVerdict& v : verdicts) check_frame(plan, v, rows);
  }

  const StagingVerdict* chosen = nullptr;
  for (const StagingVerdict& v : verdicts) {
    if (v.accepted && (forced.empty() ? !chosen : v.name == forced)) chosen = &v;
  }
  if (!chosen && !forced.empty()) {
    const StagingVerdict& v = *std::find_if(verdicts.begin(), verdicts.end(), [&](const auto& c) { return c.name == forced; });
    std::string reasons;
    for (const std::string& r : v.reasons) reasons += "\n  " + r;
    throw DispatchError(plan.name + ": staging='" + forced + "' declines:" + reasons);
  }
  if (!chosen) {
    std::string reasons;
    for (const StagingVerdict& v : verdicts) {
      reasons += "\n  " + v.name + " (declines):";
      for (const std::string& r : v.reasons) reasons += "\n      " + r;
    }
    throw DispatchError(plan.name + ": no staging holds its tiles on a GPU:" + reasons);
  }
  plan.staging = chosen->name;
  if (plan.staging == "shared" || plan.staging == "streamed") plan.rows = rows;
  plan.staging_trace = std::move(verdicts);
}

void switch_staging(ProgramPlan& plan, const std::string& name) {
  plan.staging = name;
  // as choose_staging(plan, name) sets them: a staging that is not chunked leaves the rows as they were
  if (name == "shared" || name == "streamed") {
    std::vector<std::string> why;
    plan.rows = row_chunks(plan, why);
  }
}

}  // namespace tp
