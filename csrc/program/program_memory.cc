// A program's shared memory, sized once by live range, and the barriers between its steps.
#include <algorithm>
#include <string>
#include <vector>

#include "dispatch/architecture.h"
#include "errors.h"
#include "layout/placement.h"
#include "program/program_plan.h"

namespace tp {

namespace {

// A row-shaped copy of one value that only maps read: each takes the one value as a scalar operand
// (ProgramPlan::scalar_source), so the copy's registers are never live.
bool read_only_as_scalar(const ProgramPlan& plan, int id) {
  if (plan.scalar_source(id) < 0) return false;
  for (const ProgramStep& s : plan.steps) {
    if (std::find(s.operands.begin(), s.operands.end(), id) == s.operands.end()) continue;
    if (s.op == "copy" || s.bound->plan().call.def->family != OpFamily::elementwise) return false;
  }
  return std::find(plan.outputs.begin(), plan.outputs.end(), id) == plan.outputs.end();
}

}  // namespace

// Live range [written, last_read] of each shared tile between steps; first fit by start, so
// tiles that are never live at once share bytes. The program's inputs and outputs are the
// kernel frame's to stage (offset -1 here).
void size_shared_memory(ProgramPlan& plan) {
  const int end = static_cast<int>(plan.steps.size());
  for (int id : plan.outputs) plan.values.at(id).last_read = end;
  std::vector<int> shared, all_shared;
  long long staged_bytes = 0;  // the inputs' and outputs' tiles, which the frame holds beside them
  for (size_t i = 0; i < plan.values.size(); ++i) {
    ProgramValue& v = plan.values[i];
    if (!v.layout || !is_shared(v.storage)) continue;
    if (v.last_read < 0) v.last_read = v.written;  // written, never read
    const long long bytes = (v.layout->span() * dtype_size(v.dtype) + 15) / 16 * 16;
    v.shared_bytes = bytes;
    const bool staged = v.input >= 0 || std::find(plan.outputs.begin(), plan.outputs.end(), static_cast<int>(i)) !=
                                            plan.outputs.end();
    if (staged) {
      staged_bytes += bytes;
    } else {
      shared.push_back(static_cast<int>(i));
    }
    all_shared.push_back(static_cast<int>(i));
  }
  for (int i : shared) {
    ProgramValue& v = plan.values.at(i);
    std::vector<std::pair<long long, long long>> taken;
    for (int j : shared) {
      const ProgramValue& o = plan.values.at(j);
      if (j == i || o.shared_offset < 0) continue;
      if (o.written <= v.last_read && v.written <= o.last_read) taken.push_back({o.shared_offset, o.shared_bytes});
    }
    std::sort(taken.begin(), taken.end());
    long long at = 0;
    for (const auto& [off, bytes] : taken) {
      if (at + v.shared_bytes <= off) break;
      at = std::max(at, off + bytes);
    }
    v.shared_offset = at;
    plan.shared_bytes = std::max(plan.shared_bytes, at + v.shared_bytes);
  }
  const long long limit = target_limits(plan.context.target).shared_per_block;
  if (plan.shared_bytes + staged_bytes > limit) {
    std::string live;
    for (int i : all_shared) {
      const ProgramValue& v = plan.values.at(i);
      live += (live.empty() ? "" : ", ") + v.name + " " + std::to_string(v.shared_bytes) + " B";
    }
    throw LimitError(plan.name + ": the program needs " + std::to_string(plan.shared_bytes + staged_bytes) +
                     " bytes of shared memory (tiles " + live + "); a block has at most " + shared_bytes_str(limit) + ". "
                     "Fix: a smaller tile (more batch_dims), or storage='local' for the steps whose tiles "
                     "can live in registers");
  }
  // registers per thread over the tiles live at once; each tile placed once, not once per step
  std::vector<long long> placed_slots(plan.values.size(), -1);
  std::vector<bool> never_live(plan.values.size());
  for (size_t i = 0; i < plan.values.size(); ++i) never_live[i] = read_only_as_scalar(plan, static_cast<int>(i));
  for (int k = 0; k <= end; ++k) {
    long long slots = 0, registers = 0;
    for (size_t i = 0; i < plan.values.size(); ++i) {
      const ProgramValue& v = plan.values[i];
      if (!v.layout || v.storage != Storage::local || v.written > k || v.last_read < k || never_live[i]) continue;
      long long& own = placed_slots[i];
      if (own < 0) own = place_in_registers(*v.layout, plan.scope, v.name)->slots;
      slots += own;
      registers += own * ((dtype_size(v.dtype) + 3) / 4);
      plan.widest_thread_slots = std::max(plan.widest_thread_slots, own);
    }
    plan.peak_register_slots = std::max(plan.peak_register_slots, slots);
    plan.peak_registers = std::max(plan.peak_registers, registers);
  }
}

// A barrier before a step that reads a shared tile written since the last barrier, and before
// a copy that moves values between threads.
void mark_syncs(ProgramPlan& plan) {
  if (plan.scope.threads == 1) return;
  const std::string barrier = plan.scope.kind == ScopeKind::cluster     ? "cluster_sync"
                              : plan.scope.kind == ScopeKind::cta         ? "cta_sync"
                              : plan.scope.kind == ScopeKind::warpgroup ? "warpgroup_sync"
                                                                         : "warp_sync";
  int last_sync = -2;  // step index before which the last barrier ran; inputs are staged at -1
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    ProgramStep& step = plan.steps[k];
    bool need = false;
    for (int id : step.operands) {
      if (id < 0) continue;
      const ProgramValue& v = plan.values.at(id);
      if (is_shared(v.storage) && v.written >= last_sync) need = true;
    }
    if (step.op == "copy") {
      for (const auto& [key, val] : step.bound->plan().params) {
        if (key == "sync" && std::get<std::string>(val) != "none") need = true;
      }
    }
    if (need) {
      step.sync_before = barrier;
      last_sync = static_cast<int>(k);
    }
  }
}

}  // namespace tp
