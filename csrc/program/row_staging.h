// How a program's kernel holds its rows, chosen like a variant: candidates in priority order,
// each a predicate with its reasons, the first that accepts runs, and the plan shows them all.
//   registers  every tile in registers for the whole program (the tiles live at once fit a
//              thread's share of the block's registers)
//   shared     each instance's row inputs staged once in shared memory; each pass of the program
//              (up to a reduction, then the outputs) reads them from there a chunk of registers at
//              a time (a row the whole batch shares is read from global memory, as streamed)
//   streamed   the same passes, each re-reading the rows from global memory a chunk at a time
//              (L2 serves the re-reads while the rows in flight fit in it)
//   spilled    every tile in registers past the budget: the GPU spills the rest to local memory
//              (accepted only where nothing above is; the plan says so with the fix). A ragged
//              row is padded over the scope's threads, never replicated, so it needs no more than
//              ceil(n / threads) slots: what spills is a long row at thread scope or many tiles
//              live at once that no pass can take a chunk at a time
// The steps, their variants and their bits are the same whichever staging runs: a chunked pass
// recomputes its maps slot for slot, and each reduction folds a lane's slots in the same order
// (its variant says so: `lane_folds_in_slot_order`), one chunk after the other.
#pragma once
#include <string>
#include <vector>

namespace tp {

struct ProgramPlan;
struct ProgramValue;

// One candidate's verdict, as the plan shows it.
struct StagingVerdict {
  std::string name;
  bool accepted = false;
  std::vector<std::string> reasons;
};

// The rows of a chunked (shared or streamed) program: every row tile has `shape` and the same
// register placement in closed form, tp::RunPlace<owners, vec[, padded]> over `slots` slots per
// thread, which a pass takes `chunk_slots` at a time (a contiguous run of chunk_elements of the
// row; a padded row's last chunks hold slots past its elements).
struct RowChunks {
  std::vector<long long> shape;
  int slots = 0;
  int owners = 0, vec = 0;
  long long padded = 0;  // the row's elements where its slots are padded past them, else 0
  int chunk_slots = 0;
  int chunks() const { return slots / chunk_slots; }
  long long chunk_elements() const { return static_cast<long long>(chunk_slots) * owners; }
};

// A chunked staging's passes over the rows: one per reduction, then one for the outputs.
int passes_of(const ProgramPlan& plan);
// The bytes per instance of the row inputs the shared staging keeps for the whole program (each
// instance's own: a row the whole batch shares is read where it lies, from L2 after the first).
// At a cluster, per CTA: each CTA stages its own lanes' slots of the rows (share_bytes).
long long row_input_bytes(const ProgramPlan& plan, const RowChunks& rows);
// One row input's share in a CTA of a cluster: its threads' slots of the row (padding included).
long long share_bytes(const ProgramPlan& plan, const RowChunks& rows, const ProgramValue& v);
// Whether the shared staging keeps `v` (a row input of the instance's own).
bool staged_row_input(const ProgramValue& v, const RowChunks& rows);

// The staging names in priority order.
const std::vector<std::string>& staging_names();

// The kernel frame's shared memory per block for a plan (its staging areas, the tiles between
// steps, the copies' scratch), laid out as the GPU backend lays out its kernel; ValueError (the
// limit and the fix) where the target has less. The CUDA backend registers it when the module
// loads, so that a staging the planner accepts for a GPU target is one the kernel builder builds.
using FrameSharedBytes = long long (*)(const ProgramPlan& plan);
void set_frame_shared_bytes(FrameSharedBytes measure);

// Sets plan.staging, plan.staging_trace and (chunked) plan.rows. `forced` (the program's
// staging=) names the one candidate tried; DispatchError with its reasons when it declines.
void choose_staging(ProgramPlan& plan, const std::string& forced);

// A plan choose_staging has staged, moved to `name`, another staging its trace accepts (the
// planner scores each): what choose_staging(plan, name) sets, without building every staging's
// kernel again (the verdicts do not depend on the staging chosen).
void switch_staging(ProgramPlan& plan, const std::string& name);

}  // namespace tp
