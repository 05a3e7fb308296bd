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

// The model's constants: H200s through NVSwitch, every pair NV18 (one direction of one GPU's
// NVLink moves about 370 GB/s as NCCL and a peer copy see it). Set from measurements; the
// benchmark (benchmarks/treduce.py) prints each plan's estimates beside its times to recalibrate.
struct CostModel {
  double link_gbps = 370;        // one GPU's links, one direction
  double hbm_gbps = 3000;        // a GPU's own memory (the nccl transport's staged folds)
  double pull_us = 2.0;          // a load's round trip over the links (the pulls of root_pull, scatter_gather)
  double hop_us = 2.0;           // a chain step's flag from one GPU to the next, its data visible
  double launch_us = 3.0;        // host time to launch a kernel
  double order_us = 1.5;         // host time to order a lender's stream in one process (an event wait)
  double rendezvous_us = 15.0;   // host time of a call's meeting across processes (descriptions, verdict)
  double verdict_us = 5.0;       // what waiting for the root's verdict adds where every rank runs a kernel
  double nccl_group_us = 12.0;   // host time of one NCCL group of sends and receives
  double staged_fold_us = 8.0;   // host time of one fold of staged data (the nccl transport)
  long long nccl_chunk_bytes = 8ll << 20;  // the nccl transport's chunk (root_pull) at most
};
const CostModel& cost_model();

// Why `algorithm` cannot run the call ("" when it can): the reasons its variant declines with
// before any preference (root_pull runs every call).
std::string why_not(const std::string& algorithm, const OpCall& call, const DispatchContext& ctx);

// The algorithms that can run the call with the model's time for each (microseconds), in
// variant order (chain, scatter_gather, root_pull). The cpu backend's is root_pull alone.
std::vector<std::pair<std::string, double>> estimates(const OpCall& call, const DispatchContext& ctx);

// "" when `algorithm` is the one automatic dispatch should take; else the model's reason.
std::string costlier(const std::string& algorithm, const OpCall& call, const DispatchContext& ctx);

// The estimates as a plan shows them: "chain 58.1 us, scatter_gather 91.0 us, root_pull 140.2 us".
std::string estimates_text(const OpCall& call, const DispatchContext& ctx);

}  // namespace tp::treduce
