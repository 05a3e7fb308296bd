#include "program/scope_cost.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "dispatch/architecture.h"
#include "program/program_plan.h"

namespace tp {

namespace {

// The Hopper model's figures (an H200: 132 SMs, 4.3 TB/s measured copy bandwidth, 50 MB of L2,
// 1.98 GHz), per SM; the occupancy limits come from the target's SmLimits.
constexpr double kDramBytesPerNs = 32.0;     // 4.3 TB/s over 132 SMs
constexpr double kL2BytesPerNs = 80.0;       // about 2.5x DRAM
constexpr double kSharedBytesPerNs = 250.0;  // 128 bytes a clock
constexpr double kIssuePerNs = 4 * 1.98;     // warp instructions: four schedulers a clock
constexpr double kWavefrontsPerNs = 1.98;    // L1: one line a clock
constexpr double kLoadLatencyNs = 1700;       // a load's latency under load
constexpr double kInflightBytes = 56 * 1024;  // loads in flight that keep the SM's share busy (Little's law: 4.3 TB/s x kLoadLatencyNs / 132)
constexpr double kL2Bytes = 50e6;
// of DRAM's bandwidth, the reads of a cluster's share copied through L1 (below; fitted as 0.88 of
// all the bytes of RMSNorm and add+RMSNorm, half of them reads)
constexpr double kL1CopyRate = 0.79;
constexpr int kSms = 132;
// A thread's cp.async copies of a cluster's share in flight at once: the H200 points at 50257
// (h200-2026-11-29-s7-scopes-50257-rmsnorm-float32.jsonl, runs of one element, 4 bytes a copy):
// RMSNorm at cluster(2x256) shared, 100 copies a thread, 2.09 TB/s, at cluster(2x512), 52 copies and
// twice the threads, 3.07, both two CTAs per SM. Shares of runs of 4 (up to 64 slots at 256 threads
// per CTA, 16 copies) are not held back.
constexpr int kCopiesInFlight = 16;
// A CTA's shared staging of a row of whole 16-byte vectors fills it a vector a copy (the frame's
// block tiles: cp.async, or tp::copy_to_shared's batches of 8): the bytes a thread keeps in flight
// over its instance's time, fitted on the H200 points (h200-auto-scope-points.json and the
// cross-entropy scopes): 48-64 keep every measured shape and rank cross-entropy's forward at 32000
// bfloat16 as measured (cta(256) shared 1.75 TB/s, cta(512) 1.55, cta(128) 1.47), where a chunk's
// slots (24 bytes a thread) ranked cta(512) first; 80 and more rank small CTAs too high (RMSNorm
// bfloat16 at 16384: cta(128) shared, 3.78 TB/s, over cta(512) shared, 4.06)
constexpr double kFillBytesInFlight = 64;
// a reduction across warps: a barrier and a partial per warp through shared memory, during which
// the instance has no loads in flight (the sweep: rows of 16384 bfloat16, two reductions, lose 20 %
// from 256 to 512 threads with the same bytes in flight)
constexpr double kReductionWaitNs = 200;
constexpr double kPerWarpNs = 10;
constexpr int kFrameRegisters = 24;  // addresses, indices and loop counters beside the tiles
constexpr int kFrameChunkSlots = 16;  // a one-step program's kernel frame stages operands this many a thread at a time
// instructions per element of a map: a functor with a fast form (exp, log, fdiv, rsqrt, ...) is a
// call of a dozen or more; the rest one or two
constexpr double kLongMapInstructions = 16;
constexpr double kShortMapInstructions = 2;
// A cluster (an instance of several CTAs, one per SM at these sizes). A whole-row reduction crosses
// CTAs in one exchange (tp::ClusterLanes::butterfly): a cluster barrier, then every CTA's partial
// read. On an H200 lease (reference/auto_scope_long_rows.md) remote stores plus two barriers took
// 939 / 1061 / 1216 / 1612 cycles for clusters of 2 / 4 / 8 / 16 with the CTAs in step; in a
// program each CTA reaches the barrier when its own loads have landed and waits for the last one.
// What an exchange costs there comes from the H200 points (h200-2026-11-29-programs-final.json):
// softmax and logsumexp at 32000-262144 on clusters of 2-16 (two CTAs per SM, a share of 16000-16384
// elements each), their time less this model's memory or cores and barriers within the CTAs:
// float32 (memory-bound) 0.6-1.6 / 0.7-1.2 / 1.1-1.5 / 1.9 us per exchange, bfloat16 more.
double cluster_exchange_ns(int ctas) { return ctas <= 2 ? 900 : ctas <= 4 ? 1000 : ctas <= 8 ? 1250 : 1900; }
// Clusters of up to 2 CTAs can use all 132 SMs, of 4 or 8 at most 120, of 16 at most 112
// (cudaOccupancyMaxActiveClusters at one CTA per SM, the same lease).
int cluster_sms(int ctas) { return ctas <= 2 ? kSms : ctas <= 8 ? 120 : 112; }

std::string fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

struct Traffic {
  double in_bytes = 0, out_bytes = 0;  // per instance, once
  int in_size = 4;                     // bytes of the widest input's element
  long long row = 1;                   // the widest input's elements
  double held_bytes = 0;               // per slot of the row: every input tile a thread holds, weights too, widened
  int held_rows = 0;                   // input tiles of the row's length, weights too
};

Traffic traffic(const ProgramPlan& plan) {
  Traffic t;
  int arithmetic = 0;  // the widest element the steps compute in (a 16-bit input cast to float: 4)
  for (const ProgramValue& v : plan.values) {
    if (v.input < 0) arithmetic = std::max(arithmetic, dtype_size(v.dtype));
  }
  for (const ProgramValue& v : plan.values) {
    if (v.input < 0) continue;
    // in registers a 16-bit tile the steps widen takes a register per element, as a float would
    const double width = static_cast<double>(std::max(dtype_size(v.dtype), arithmetic));
    t.held_bytes += width * static_cast<double>(v.elements());
    if (v.batch_broadcast) continue;  // a tile the batch shares is read from L2
    t.in_bytes += static_cast<double>(v.elements() * dtype_size(v.dtype));
    if (v.elements() >= t.row) t.row = v.elements(), t.in_size = static_cast<int>(dtype_size(v.dtype));
  }
  t.held_bytes /= static_cast<double>(t.row);
  for (const ProgramValue& v : plan.values) t.held_rows += v.input >= 0 && v.elements() == t.row ? 1 : 0;
  for (int id : plan.outputs) {
    const ProgramValue& v = plan.values.at(id);
    const long long bytes = v.elements() * dtype_size(v.dtype);
    t.out_bytes += static_cast<double>(bytes) * (v.accumulated ? 2 : 1);
  }
  return t;
}

// A map's instructions for every element of its result.
double map_instructions(const ProgramPlan& plan, const ProgramStep& s) {
  const OpDef& def = *s.bound->plan().call.def;
  if (def.family != OpFamily::elementwise) return 0;
  const double per = def.device_fn_fast.empty() ? kShortMapInstructions : kLongMapInstructions;
  return per * static_cast<double>(plan.values.at(s.result).elements());
}

// What a program's passes over its rows read and compute, as the kernel frame runs them
// (backends/cuda/program_frame.cc): one pass per reduction of a row, reading the row inputs and
// computing the maps that lead to it, then one for the rows the program returns (none where every
// output is reduced, as logsumexp's); the rest once. Staged in registers, everything once.
struct PassWork {
  double row_reads = 0;     // bytes of the instance's own row inputs, over every pass
  double stored_reads = 0;  // of them, the pass that stores the rows the program returns
  bool stores_rows = false;
  double instructions = 0;  // of the maps, over every pass
};

PassWork pass_work(const ProgramPlan& plan, const Traffic& t) {
  PassWork w;
  if (!plan.rows) {
    for (const ProgramStep& s : plan.steps) w.instructions += map_instructions(plan, s);
    w.row_reads = t.in_bytes;
    return w;
  }
  auto row = [&](int id) { return id >= 0 && plan.values.at(id).shape == plan.rows->shape; };
  auto pass = [&](const std::vector<int>& targets) {
    const double before = w.row_reads;
    std::set<int> needed(targets.begin(), targets.end());
    for (size_t j = plan.steps.size(); j-- > 0;) {
      if (!needed.count(plan.steps[j].result)) continue;
      for (int id : plan.steps[j].operands) {
        if (row(id)) needed.insert(id);
      }
    }
    for (int id : needed) {
      const ProgramValue& v = plan.values.at(id);
      if (v.input >= 0 && !v.batch_broadcast) w.row_reads += static_cast<double>(v.elements() * dtype_size(v.dtype));
    }
    for (const ProgramStep& s : plan.steps) {
      if (needed.count(s.result) && row(s.result)) w.instructions += map_instructions(plan, s);
    }
    return w.row_reads - before;
  };
  for (const ProgramStep& s : plan.steps) {
    if (row(s.result)) continue;  // computed in the passes that need it
    const bool folds_row = s.op != "copy" && !s.operands.empty() && row(s.operands.front()) &&
                           s.bound->plan().call.def->family == OpFamily::reduction;
    if (folds_row) {
      pass({s.operands.front()});
    } else {
      w.instructions += map_instructions(plan, s);
    }
  }
  std::vector<int> stored;
  for (int id : plan.outputs) {
    if (row(id)) stored.push_back(id);
  }
  w.stores_rows = !stored.empty();
  if (w.stores_rows) w.stored_reads = pass(stored);
  return w;
}

// The SM's cores per row: map instructions (chunked passes recompute the ones they need),
// shared-memory passes, and a thread-scope row's loads, one L1 wavefront per element.
double core_ns(const ProgramPlan& plan, const Traffic& t, const PassWork& work, const SmLimits& limits) {
  double core = work.instructions / limits.warp_threads / kIssuePerNs;
  if (plan.staging == "shared") core += work.row_reads / kSharedBytesPerNs;
  if (plan.scope.threads == 1) core += static_cast<double>(t.row) * 2 / kWavefrontsPerNs;
  return core;
}

std::string target_of(const ProgramPlan& plan) { return plan.context.target.empty() ? "sm_90a" : plan.context.target; }

// The maps take longer than the row's load at the SM's share of the DRAM (maps_outlast_row_load).
bool outlasts_load(double core, const Traffic& t) { return core > t.in_bytes / kDramBytesPerNs; }

}  // namespace

bool maps_outlast_row_load(const ProgramPlan& plan) {
  const Traffic t = traffic(plan);
  return outlasts_load(core_ns(plan, t, pass_work(plan, t), target_limits(target_of(plan))), t);
}

ScopeCost estimate_cost(const ProgramPlan& plan) {
  ScopeCost cost;
  const SmLimits limits = target_limits(target_of(plan));
  const int threads = plan.scope.threads;
  // a cluster's limits are each CTA's: its warps, registers and shared memory per CTA
  const int ctas = plan.scope.ctas, cta_threads = plan.scope.cta_threads();
  const int warps = static_cast<int>(ceil_div(cta_threads, limits.warp_threads));
  const Traffic t = traffic(plan);
  const bool chunked = plan.rows.has_value();
  const bool frame = plan.frame_stages_every_tile();
  const PassWork work = pass_work(plan, t);

  // the slots of a row each thread holds at once, and its registers, as ptxas gave the sweep's
  // kernels: a `registers` staging holds every input tile across the steps, a weight the batch
  // shares too, a 16-bit tile the steps widen to float a whole register per element (rmsnorm
  // float32: 2 x slots + 18; softmax bfloat16: slots + 16 to 34); a chunked staging or the frame's
  // chunks hold a chunk of the input and the tile computed from it, once and a half its registers
  long long slots = ceil_div(t.row, threads);
  if (frame) slots = std::min<long long>(slots, kFrameChunkSlots);
  if (chunked) slots = plan.rows->chunk_slots;
  const bool whole_rows = plan.staging == "registers" && !frame;
  const long long row_registers = whole_rows ? static_cast<long long>(std::ceil(static_cast<double>(slots) * t.held_bytes / 4))
                                             : 3 * ceil_div(slots * t.in_size, 4) / 2;
  // a cluster's 16-bit rows at runs of one element, each element a 2-byte load of its own: holding
  // a second row (a weight) beside the first, ptxas took a register per slot of it besides (RMSNorm
  // bfloat16 at rows of 50257, cluster(4x256) / (4x512) / (8x256): 174 / 112 / 100 registers; at
  // 50258, runs of two, 127 / 82 / 78; float32 and one-row softmax and logsumexp: as estimated)
  const bool halves = ctas > 1 && t.in_size < 4 && spread_run(t.row) == 1;
  const long long addresses = whole_rows && halves ? slots * std::max(0, t.held_rows - 1) : 0;
  long long registers = (row_registers + addresses + kFrameRegisters + 7) / 8 * 8;
  if (plan.staging == "spilled") registers = plan.register_budget();
  registers = std::min<long long>(limits.registers_per_thread, registers);

  // instances resident per SM: CTAs by CUDA's rules; smaller scopes share blocks of warps
  const long long warp_registers = ceil_div(registers * limits.warp_threads, limits.register_unit) * limits.register_unit;
  long long shared = plan.shared_bytes + 8LL * warps;
  if (plan.staging == "shared") shared += row_input_bytes(plan, *plan.rows);
  long long resident;  // instances per SM; a cluster's CTAs per SM
  if (threads >= 64 || plan.scope.kind == ScopeKind::warpgroup) {
    resident = std::min<long long>({limits.blocks, limits.threads / cta_threads, limits.registers / (warp_registers * warps),
                                    limits.shared / (shared + limits.shared_reserved_per_block)});
  } else {
    const long long resident_warps = std::min<long long>(limits.threads / limits.warp_threads, limits.registers / warp_registers);
    resident = std::min<long long>(resident_warps * limits.warp_threads / threads, limits.shared / std::max(1LL, shared));
  }
  resident = std::max<long long>(resident, 1);
  cost.instances_per_sm = static_cast<int>(resident);

  // memory: the row once, re-reads from L2 or DRAM, spills, at the bandwidth occupancy allows
  // a cluster's shared staging copies each CTA's share with cp.async, a copy per run of 4, 8 or 16
  // bytes where the row starts on a whole run (tp::stage_share: float32 runs of one element, rows
  // of 50257, start there always), every copy in flight at once up to kCopiesInFlight a thread;
  // other runs (16-bit runs of one) move through registers a chunk at a time (below)
  const long long run_bytes = chunked ? plan.rows->vec * t.in_size : 0;
  const bool whole_share = ctas > 1 && plan.staging == "shared" && (run_bytes == 4 || run_bytes == 8 || run_bytes == 16) &&
                           t.row * t.in_size % run_bytes == 0;
  const long long inflight_slots = whole_share ? std::min<long long>(plan.rows->slots, kCopiesInFlight * plan.rows->vec) : slots;
  // a CTA's shared staging: its fill's bytes in flight, not a chunk's (kFillBytesInFlight)
  const bool vector_fill = ctas == 1 && plan.staging == "shared" && t.row * t.in_size % 16 == 0;
  const double thread_inflight = vector_fill ? std::min(kFillBytesInFlight, static_cast<double>(t.row * t.in_size) / cta_threads)
                                             : static_cast<double>(inflight_slots * t.in_size);
  const double inflight = static_cast<double>(resident * cta_threads) * thread_inflight;
  // 16-byte runs copy past L1 (cp.async.cg); shorter ones through it (cp.async.ca), more slowly:
  // the copy of the row inputs, not the stores. The H200 points of bfloat16 RMSNorm and add+RMSNorm
  // (runs of 8 bytes) on clusters at three or more CTAs per SM took 1.09-1.25x this model's time
  // without it (float32's, 16 bytes, 0.91-1.04x); logsumexp float32 at 50257 (4 bytes, all its
  // bytes copied) ranks cluster(4x256) registers (2.60 TB/s) over cluster(2x512) shared (1.93)
  // with it
  const double copy_rate = whole_share && run_bytes < 16 ? kL1CopyRate : 1.0;
  const double busy = std::min(1.0, inflight / kInflightBytes);
  double dram_bytes = t.in_bytes + t.out_bytes, l2_bytes = 0, hit = 0;
  if (plan.staging == "streamed" && work.row_reads > t.in_bytes) {
    const double rereads = work.row_reads - t.in_bytes;
    hit = std::min(1.0, kL2Bytes / (static_cast<double>(resident) / ctas * kSms * t.in_bytes));
    l2_bytes += hit * rereads;
    dram_bytes += (1 - hit) * rereads;
  }
  if (plan.staging == "spilled") {
    dram_bytes += 2.0 * 4 * std::max<long long>(0, plan.peak_registers - plan.register_budget()) * threads;
  }
  // a cluster's SMs: those clusters of its size can occupy, each taking its share of the bandwidth
  const double sms = ctas > 1 ? cluster_sms(ctas) : kSms;
  const double copy_extra = t.in_bytes / copy_rate - t.in_bytes;  // bytes' worth of time the copy adds
  // a streamed pass that stores rows reads a chunk from DRAM, maps it and stores it before the
  // next: with more rows in flight on the chip than SMs, DRAM serves that pass's reads and writes
  // at 1/sqrt(rows in flight / SMs) of its rate (the H200 points of cross-entropy's backward, one
  // such pass, at rows of 32000 and 128256 bfloat16, h200-2026-11-29-s7-cross-entropy-scopes.jsonl:
  // 1, 3 and 6 rows per SM 3.04 / 2.26 / 1.39 TB/s at 128256, the same bytes in flight per SM;
  // softmax and RMSNorm float32 at 50257, h200-2026-11-29-s7-scopes-50257-*.jsonl, whose storing
  // pass re-reads the row from DRAM: cta(1024) / (512) / (256) streamed 2.45 / 1.98 / 1.78 and
  // 2.89 / 2.15 / 1.92 TB/s). Not measured: why (no profiler run); a pass whose re-reads hit L2
  // (RMSNorm bfloat16 at 16384, cta(256) streamed 3.84 TB/s at 6 rows per SM) does not slow down
  const double rows_in_flight = static_cast<double>(resident) / ctas * sms;
  const double interleaved = plan.staging == "streamed" && work.stores_rows ? (1 - hit) * (work.stored_reads + t.out_bytes) : 0;
  const double interleave_rate = interleaved > 0 ? std::min(1.0, std::sqrt(kSms / rows_in_flight)) : 1.0;
  const double interleave_extra = interleaved / interleave_rate - interleaved;  // bytes' worth of time it adds
  const double memory = ((dram_bytes + copy_extra + interleave_extra) / (kDramBytesPerNs * busy) + l2_bytes / kL2BytesPerNs) * kSms / sms;
  cost.terms.push_back("memory " + fixed(memory) + " ns: " + fixed(dram_bytes) + " bytes from DRAM" +
                       (l2_bytes > 0 ? " and " + fixed(l2_bytes) + " re-read from L2" : "") + ", " +
                       std::to_string(resident) + (ctas > 1 ? " CTAs" : " instances") + " per SM keep " + fixed(busy * 100) +
                       " % of its share busy (" + std::to_string(registers) + " registers per thread, " +
                       (vector_fill ? "its fill " + fixed(thread_inflight) + " B a thread in flight)"
                                    : std::to_string(inflight_slots) + " slots in flight)") +
                       (copy_rate < 1 ? ", the share's reads copied through L1 at " + fixed(copy_rate * 100) + " %" : "") +
                       (interleave_rate < 1 ? ", " + fixed(rows_in_flight) + " rows in flight on the chip: the pass that stores them reads and writes DRAM at " +
                                                  fixed(interleave_rate * 100) + " %"
                                            : "") +
                       (ctas > 1 ? "; clusters of " + std::to_string(ctas) + " run on " + fixed(sms) + " of the " +
                                       std::to_string(kSms) + " SMs"
                                 : std::string()));

  const double instructions = work.instructions;
  const double core = core_ns(plan, t, work, limits);
  if (core > 0) {
    cost.terms.push_back("cores " + fixed(core) + " ns: " + fixed(instructions / limits.warp_threads) +
                         " warp instructions of maps" + (plan.staging == "shared" ? ", passes over shared memory" : "") +
                         (threads == 1 ? ", one L1 wavefront per element of a thread's row" : ""));
  }

  // barriers: each reduction across warps (and a shared staging's fill) waits, hidden by the
  // other instances on the SM
  int waits = 0;
  if (warps > 1) {
    for (const ProgramStep& s : plan.steps) waits += s.bound->plan().call.def->family == OpFamily::reduction ? 1 : 0;
    waits += plan.staging == "shared" ? 1 : 0;
  }
  // a cluster: each reduction's butterfly crosses CTAs in one exchange, a cluster barrier, which
  // every CTA of the instance (an SM each) waits through
  const int reductions = waits - (plan.staging == "shared" ? 1 : 0);
  const double exchanges = ctas > 1 ? reductions * cluster_exchange_ns(ctas) : 0;
  const double barriers = (waits * (kReductionWaitNs + kPerWarpNs * warps) + exchanges) * ctas / static_cast<double>(resident);
  if (waits > 0) {
    cost.terms.push_back("barriers " + fixed(barriers) + " ns: " + std::to_string(waits) + " across " +
                         std::to_string(warps) + " warps" +
                         (ctas > 1 ? " and " + std::to_string(reductions) + " cluster barriers (" +
                                         fixed(cluster_exchange_ns(ctas)) + " ns each) on each of " +
                                         std::to_string(ctas) + " CTAs"
                                   : std::string()) +
                         ", hidden by " + std::to_string(resident - 1) + " other " + (ctas > 1 ? "CTAs" : "instances"));
  }
  // How the instance's loads, maps and stores overlap, and what waits for its loads to land:
  // - staged on chip, an instance issues all its loads and then computes; the other instances on
  //   the SM overlap it: the larger of memory and cores
  // - a streamed pass takes a chunk at a time, each chunk's maps folded before the next chunk's
  //   loads, so a warp alternates the two and only the other warps overlap them (so does a shared
  //   staging's pass with no other instance on the SM): the H200 points of streamed stagings at
  //   32000-262144 (softmax and logsumexp 0.77-0.85x of the larger alone) fit the root of the sum
  //   of squares (the larger where one dominates, 1.41x it where they are equal)
  // - a cluster's CTA alone on its SM with its share on chip runs its loads, maps and stores one
  //   after the other (the cluster's CTAs wait for each other at every exchange, and a cluster
  //   starts only where all its SMs are free): the sum. The points of RMSNorm and add+RMSNorm staged
  //   in shared memory on clusters of 2-16 at one CTA per SM took 1.4-1.8x the larger alone; a lone
  //   CTA of one does not (cta(1024) shared at 16384 rows: 4.1 TB/s, the other SMs' fill its gaps)
  //   unless its row is not a multiple of 16 bytes: then the fill moves the row element by element
  //   (tp::copy_to_shared, 3 rows in 4 in float32) before the first pass (rows of 50257 at
  //   cta(1024) shared, one CTA per SM: softmax, logsumexp and add+RMSNorm 0.76-0.99x streamed)
  // - so does a cluster's share that moves through registers a chunk at a time, each chunk's loads
  //   landing before its stores to shared, whatever the CTAs per SM (bfloat16 at 50257, runs of
  //   one: logsumexp at cluster(2x512) and (4x256) shared 0.92 and 0.84 TB/s, cta(512) streamed 1.69)
  // - so do a cluster's 16-bit rows at runs of one element held in registers, each element a 2-byte
  //   load of its own (logsumexp bfloat16 at 50257: cluster(2x256) registers 0.97 TB/s, 2.2x the
  //   larger of memory and cores; cta(512) streamed 1.66)
  // - alone on its SM, a streamed CTA or a cluster's CTA waits at each reduction for its last loads
  //   to land (the 1.7 us of kLoadLatencyNs), with no other instance to fill it (rows of 65536-131072
  //   float32 at cta(1024) streamed: 0.85-0.90x the estimate without it); but the DRAM is the chip's:
  //   where the pass after the reduction re-reads the row from L2, the other SMs' loads take the DRAM
  //   time it leaves idle, so only the share of the re-reads that misses L2 drains (rows that all fit
  //   L2, 32000-65536 float32 at cta(1024) streamed: 1.14-1.24x the estimate with the whole drain,
  //   0.99-1.07x with this share)
  // - a CTA alone on its SM holding its rows in registers takes a row at a time: it loads the row
  //   (DRAM's latency, then its share of the bandwidth), maps and folds it, and stores it as it
  //   loads the next (softmax at rows of 32000, cta(512) and cta(1024) registers, float32 and
  //   bfloat16: 0.89-1.05x this; the larger of memory and cores alone gave 1.17-1.89x); where its maps
  //   outlast the row's load and shared memory holds its row inputs (sm_80 on), the frame copies the
  //   next row into it as the CTA works on this one (maps_outlast_row_load), and no row waits for
  //   its loads' latency (the same points: 0.97 / 0.94x this at cta(512) / cta(1024) float32, 0.86 /
  //   0.85x bfloat16; measured 3.30 -> 3.41-3.43, 3.07 -> 3.23, 1.61-1.63 -> 1.93-1.94 and
  //   1.66-1.70 -> 1.83-1.85 TB/s with the copy)
  const bool on_chip = plan.staging == "registers" || plan.staging == "shared";
  const bool row_fill_by_element = ctas == 1 && plan.staging == "shared" && t.row * t.in_size % 16 != 0;
  const bool serial = on_chip && ((resident == 1 && (ctas > 1 || row_fill_by_element)) ||
                                  (ctas > 1 && plan.staging == "shared" && !whole_share) || (whole_rows && halves));
  const bool drains = resident == 1 && (serial || plan.staging == "streamed");
  const bool row_at_a_time = resident == 1 && ctas == 1 && plan.staging == "registers";
  const bool prefetched = row_at_a_time && sm_version(target_of(plan)) >= 80 &&
                          shared + t.in_bytes <= limits.shared_per_block && outlasts_load(core, t);
  const double one_row = t.in_bytes / kDramBytesPerNs + (prefetched ? 0 : kLoadLatencyNs) + core;
  const double overlapped = serial                                                    ? memory + core
                            : row_at_a_time                                           ? std::max(memory, one_row)
                            : plan.staging == "streamed" || (chunked && resident == 1) ? std::hypot(memory, core)
                                                                                       : std::max(memory, core);
  const double drain = drains ? reductions * kLoadLatencyNs * ctas * (1 - hit) : 0;
  if (serial) {
    cost.terms.push_back(std::string(whole_rows && halves   ? "its 16-bit rows of runs of one in registers, an element a load"
                                     : resident > 1        ? "its share moves through registers a chunk at a time"
                                     : row_fill_by_element ? "alone on its SM, its row filled element by element"
                                                           : "one CTA per SM") +
                         ": its loads, maps and stores do not overlap");
  }
  if (row_at_a_time) {
    cost.terms.push_back("a row at a time: " + fixed(one_row) + " ns to load it, map it and fold it, alone on its SM" +
                         (prefetched ? ", the next row copied into shared memory meanwhile" : ""));
  }
  if (drains) {
    cost.terms.push_back("drains " + fixed(drain) + " ns: " + std::to_string(reductions) +
                         " reductions wait for their loads to land, alone on the SM");
  }
  cost.ns_per_row = overlapped + barriers + drain;
  return cost;
}

}  // namespace tp
