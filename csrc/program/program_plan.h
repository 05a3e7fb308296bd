// Tile programs: one more stage in front of dispatch, not a second path. A traced program is a
// list of steps (op, operand values, options); plan_program plans each step through the
// registry exactly as the standalone call of that step would be planned (the call-shape cache
// gives the same bound plan), inserts a copy step where an operand's placement differs from
// what the step's variant takes (with the reason), checks that every tile fits the scope and
// sizes shared memory for the whole program by live range. Backends run the result. A
// standalone call is the program of one step (call_program): the same planner, the same runs.
#pragma once
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/architecture.h"
#include "dispatch/context.h"
#include "dispatch/op_call.h"
#include "dispatch/plan_cache.h"
#include "layout/exec_scope.h"
#include "layout/tile_layout.h"
#include "program/auto_scope.h"
#include "program/row_staging.h"

namespace tp {

// ---- what tracing hands over ---------------------------------------------------------------
struct ProgramInput {
  std::string name;
  DType dtype = DType::float32;
  std::vector<long long> shape;  // one tile
  bool batch_broadcast = false;  // one tile shared by every instance of the batch
};

struct StepSpec {
  std::string op;
  std::vector<int> operands;    // value ids (inputs first, then step k's result is inputs + k); -1: a scalar
  std::vector<double> scalars;  // per operand: a scalar constant's value
  // per operand (or empty: none): the program call's run-time scalar it reads (a kernel parameter,
  // a new value each call), -1 where it is the constant in `scalars`
  std::vector<int> scalar_args;
  std::vector<int> axes;        // reductions
  bool keepdims = false;
  std::string dtype;            // cast: the result's dtype
  std::string storage;          // empty: the planner's choice
  std::optional<TileLayout> layout, out_layout;
  std::string dispatch;
  std::map<std::string, ConfigValue> config;
  std::string where;            // the user's file:line
  std::string name;             // the result's name in the user's code, or empty
  // The step's call exactly as made, operands placed as given (a standalone call's): planned as it
  // is, with no placement of the planner's; its accum folds into the output's old value.
  std::optional<OpCall> call;
  bool storage_given = true;  // the call named its storage (else its scope's default: auto_scope.h)
};

struct ProgramSpec {
  std::string name;
  ExecScope scope;
  bool auto_scope = false;  // the scope is named nowhere: the planner chooses it (auto_scope.h)
  // with auto_scope, only this one of the planner's candidate scopes (its str(); empty: all): a point
  // of the scope trace planned again as it was there (autotuning's candidates)
  std::string auto_scope_only;
  std::string storage;  // the program's default storage for its steps; empty: the planner's choice
  std::string staging;  // how the kernel holds the rows (row_staging.h); empty: the first that accepts
  bool fastmath = false;  // every elementwise step's fastmath= where the step names none (DESIGN §3)
  std::vector<ProgramInput> inputs;
  std::vector<StepSpec> steps;
  std::vector<int> outputs;  // value ids
  int scalar_args = 0;       // run-time scalars of each call (StepSpec::scalar_args)
};

// ---- the plan --------------------------------------------------------------------------------
struct ProgramValue {
  std::string name;
  DType dtype = DType::float32;
  std::vector<long long> shape;
  Storage storage = Storage::local;
  std::optional<TileLayout> layout;  // unset until placed: an input is staged where its first reader wants it
  int input = -1;                    // the program input it is, or -1
  bool batch_broadcast = false;
  int written = -1;                  // step index that writes it (-1: staged before step 0)
  int last_read = -1;                // last step index reading it (outputs: the number of steps)
  long long shared_offset = -1;      // shared tiles between steps: byte offset in the program's shared
                                     // memory; -1 for inputs and outputs (the kernel frame stages those)
  long long shared_bytes = 0;
  bool accumulated = false;          // an output its step folds into (accum): its old value is read first

  long long elements() const;
  std::string placement() const;  // "shared S[4096 : 1]"
  bool in_registers() const { return layout && storage == Storage::local; }
  // In registers, every thread of the scope holding element k in slot k (a reduction's result
  // replicated over the threads): a thread reads any element of it from its own registers.
  bool held_by_every_lane(const ExecScope& scope) const;
};

struct ProgramStep {
  std::string op;
  std::shared_ptr<const BoundPlan> bound;  // the standalone call's bound plan
  std::vector<int> operands;               // value ids, -1 for scalars
  std::vector<double> scalars;
  std::vector<int> scalar_args;            // per operand: a run-time scalar (StepSpec::scalar_args), or -1
  int result = -1;
  std::string where;
  bool inserted = false;              // a copy the planner added
  std::vector<std::string> reasons;   // why this placement, layout or copy
  std::string sync_before;            // the barrier before it ("" none, "cta_sync", ...)
};

struct ProgramPlan {
  std::string name;
  ExecScope scope;
  DispatchContext context;
  std::vector<ProgramValue> values;
  std::vector<ProgramStep> steps;
  std::vector<int> outputs;
  int scalar_args = 0;                 // run-time scalars of each call
  long long shared_bytes = 0;          // per instance, the tiles between steps, reused by live range
  long long peak_register_slots = 0;   // per thread, over the tiles live at once
  long long peak_registers = 0;        // the same in 32-bit registers (a 64-bit element takes two)
  long long widest_thread_slots = 0;   // per thread, the most elements one tile puts in its registers
  std::string staging = "registers";   // how the kernel holds the rows (row_staging.h)
  std::vector<StagingVerdict> staging_trace;  // every candidate's verdict, in priority order
  std::optional<RowChunks> rows;       // shared and streamed: the rows and their chunks
  std::vector<ScopeVerdict> scope_trace;  // an auto-scoped plan: every candidate's verdict; else empty
  // Outputs (positions in `outputs`) returned summed over runs of folded_tiles consecutive instances
  // of the batch, in order from -0.0 in float32 (float64 for float64), one tile a run, instead of a
  // tile an instance: a norm's weight gradient summed where the CUDA kernel computes it
  // (tileprim._torch.folded_gradients; the CPU backend refuses such a plan).
  std::vector<int> folded;
  long long folded_tiles = 0;

  // The registers a thread of the scope may hold on the target (dispatch/architecture.h): its
  // share of a block's, within a thread's limit.
  long long register_budget() const {
    const SmLimits limits = target_limits(context.target);
    return std::min<long long>(limits.registers_per_thread, limits.registers_per_block / std::max(1, scope.cta_threads()));
  }

  // The scalar operand i of step s as a run gives it: the call's run-time scalar, or the constant.
  double scalar(const ProgramStep& s, size_t i, const std::vector<double>& run_time) const;
  // The body is one call of a step on the program's own inputs and output (a program of one step,
  // a standalone call among them): no tile lives between steps, so the kernel frame stages the
  // step's operands as it stages any (a map a chunk of registers at a time, a long run read where
  // it lies) and the tiles need not fit a thread's registers whole.
  bool frame_stages_every_tile() const;
  // Value id's one element where a map step reads id as a scalar operand: id is a copy of a
  // one-element value every thread reads where it lies (in passes over chunks each lane holds the
  // one element; a replicated reduction result; a shared tile), else -1. Where every reader of id
  // is a map, id's own registers are never live (the kernel declares them; nothing reads them).
  int scalar_source(int id) const;

  std::string str() const;  // a table: one row per step
  std::string scope_trace_str() const;  // the lines of the scope trace ("" where a scope is named)
};

// Steps that give the same bits before a cast run before it (steps_before_casts.cc):
// take_along_axis(cast(x), idx) -> cast(take_along_axis(x, idx)), x a float program input, so
// that the pick reads x where it lies; max/min(cast(x)) -> cast(max/min(x)), the cast widening a
// 16-bit float, so that its registers fold in pairs (`reductions`). plan_at_scope plans the
// rewritten program.
ProgramSpec steps_before_casts(const ProgramSpec& spec, bool reductions);

// The plan of a program: at its scope, or (spec.auto_scope) at the scope the planner chooses.
std::shared_ptr<const ProgramPlan> plan_program(const ProgramSpec& spec, const DispatchContext& ctx);
// The plan at spec.scope.
std::shared_ptr<const ProgramPlan> plan_at_scope(const ProgramSpec& spec, const DispatchContext& ctx);
// The plan with outputs `folded` (positions in plan.outputs, floats) summed over runs of `tiles`
// consecutive instances (ProgramPlan::folded); ValueError / TypeError otherwise.
std::shared_ptr<const ProgramPlan> with_folded_outputs(const ProgramPlan& plan, long long tiles,
                                                       const std::vector<int>& folded);

// The shape of a step's result, NumPy's rules: a map's operands broadcast right-aligned, a
// reduction drops its axes (keepdims: keeps 1s there; `axes` normalised to 0..rank-1 in place),
// () where every dim is reduced. ValueError naming `where` (the user's file:line) otherwise.
std::vector<long long> broadcast_shapes(const std::vector<std::vector<long long>>& shapes, const std::string& where,
                                        const std::string& op);
std::vector<long long> reduced_shape(const std::vector<long long>& shape, std::vector<int>& axes, bool keepdims,
                                     const std::string& where);

// A standalone call as the program of one step: its array operands are the program's inputs (in
// order, named by their argument), its scalar operands the call's run-time scalars, its result
// the one output; the step is the call as made (StepSpec::call).
ProgramSpec call_program(const OpCall& call);

// Stages of plan_program (program_memory.cc): shared tiles get byte offsets by live range (tiles
// never live at once share bytes; LimitError with the tiles and the fix past the target's shared
// memory per block), and the
// peak register slots per thread; then the scope's barrier is marked before each step that reads
// a shared tile written since the last one, or moves values between threads.
void size_shared_memory(ProgramPlan& plan);
void mark_syncs(ProgramPlan& plan);

// The layout a multi-thread scope gives a tile when a step names none: the elements spread over
// the scope's threads as evenly as the shape allows, in runs interleaved over the threads where
// every thread gets more than one run (so that a warp's accesses are contiguous), else one run
// each; a run is 4 elements, or 2 or 1 where the tile is not a multiple of 4 (so that every tile of
// a batch starts on a whole run). A tile the threads do not divide is padded: every thread holds ceil(n / threads)
// slots (whole runs past one), the slots past its end holding nothing (a tile of several dims
// is padded flat: its reductions group it into dims where the padding lies in dim 0, else fold
// it in shared memory). One value: a copy in every thread.
std::optional<TileLayout> spread_layout(const std::vector<long long>& shape, const ExecScope& scope);
// The elements of each run of spread_layout for a tile of n elements: 4, 2 or 1.
long long spread_run(long long n);

}  // namespace tp
