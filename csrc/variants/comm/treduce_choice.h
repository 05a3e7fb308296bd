// Which treduce algorithms can run a call, and which of them should: a cost model of each
// algorithm's time for (bytes per rank, ranks, transport), from stated constants of the links and
// the host. Automatic dispatch takes the cheapest that can run (each variant's `fastest`
// preference); dispatch= still forces any that can. Every plan shows the estimates.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "dispatch/context.h"
#include "dispatch/op_call.h"

namespace tp::treduce {

// The model: a call costs the larger of its host time (issuing it) and its GPU time (calls issued
// back to back overlap the two), each a fixed part plus what the algorithm moves over the
// busiest link:
//   host, one process:  call + launches x launch + stream memory operations x memop
//   host, processes:    rendezvous(N) + launch (+ verdict, where every rank runs a kernel)
//   root_pull:          pull + pull_rank x (N - 1) + (N - 1) S / link
//   scatter_gather:     shards + pull_rank x (N - 1) + shards_traffic x (2N - 3) / (N - 1) x S / link
//   chain:              chain + (k + N - 1) x max(chain_step, round / link)
// (S: bytes per rank; k: steps per CTA; round: ctas x step bytes, what the chain keeps in flight
// per link; chain.cuh). Where a simpler algorithm (later in variant order: root_pull, then
// scatter_gather) is within `simpler_margin` of the fastest, it is taken: its figures are measured,
// and a tie is noise.
//
// The constants: H200s through NVSwitch, every pair NV18, fitted to the 4-GPU lease of
// 2026-11-28 (benchmarks/treduce.py; within ~5% of root_pull at 2 and 4 GPUs from 1 MiB up and
// of scatter_gather from 64 MiB up, the host floors within ~15%); the chain's to its kernel's
// model in chain.cuh (its old kernel measured 4-5 us a step), not yet measured. The benchmark
// prints each plan's estimates beside its times to recalibrate.
struct CostModel {
  double link_gbps = 370;          // one GPU's links, one direction (a peer copy: 386; NCCL: 349-359)
  double hbm_gbps = 3000;          // a GPU's own memory (the nccl transport's staged folds)
  double call_us = 12;             // a one-process call's host time besides launches (Python, C++, driver)
  double launch_us = 2;            // host time of a kernel launch
  double memop_us = 0.5;           // host time of a stream memory operation (a lender's ready, its wait)
  double rendezvous_us = 24.5;     // host time of a call's meeting across processes, 2 ranks ...
  double rendezvous_rank_us = 4.25;  // ... and per further rank
  double verdict_us = 5;           // what waiting for the root's verdict adds where every rank runs a kernel
  double pull_us = 9.5;            // root_pull's kernel: its start, flags, the first loads' round trip
  double pull_rank_us = 3;         // ... per rank it reads
  double shards_us = 11;           // scatter_gather's workers: their start, flags and the root's wait
  double shards_traffic = 0.87;    // of the (2N - 3) / (N - 1) tensors its busiest link carries, as measured
  double chain_us = 6;             // the chain's kernels: their start, the root's last flag
  double chain_step_us = 4.5;      // a chain step's least time: its loads, its fence and flag
  double simpler_margin = 0.03;    // a simpler algorithm within this fraction of the fastest is taken
  double nccl_group_us = 12.0;     // host time of one NCCL group of sends and receives
  double staged_fold_us = 8.0;     // host time of one fold of staged data (the nccl transport)
  long long nccl_chunk_bytes = 8ll << 20;  // the nccl transport's chunk (root_pull) at most
};
const CostModel& cost_model();

// Why `algorithm` cannot run the call ("" when it can): the reasons its variant declines with
// before any preference (root_pull runs every call).
std::string why_not(const std::string& algorithm, const OpCall& call, const DispatchContext& ctx);

// The algorithms that can run the call with the model's time for each (microseconds), in
// variant order (chain, scatter_gather, root_pull). The cpu backend's is root_pull alone.
std::vector<std::pair<std::string, double>> estimates(const OpCall& call, const DispatchContext& ctx);

// "" when `algorithm` is the one automatic dispatch should take (the fastest estimate, or a
// simpler one within the margin); else the model's reason.
std::string costlier(const std::string& algorithm, const OpCall& call, const DispatchContext& ctx);

// The estimates as a plan shows them: "chain 58.1 us, scatter_gather 91.0 us, root_pull 140.2 us".
std::string estimates_text(const OpCall& call, const DispatchContext& ctx);

}  // namespace tp::treduce
