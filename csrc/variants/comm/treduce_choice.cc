#include "variants/comm/treduce_choice.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "dispatch/registry.h"
#include "variants/comm/treduce_common.h"

namespace tp::treduce {

namespace {

// What the model reads of a call.
struct Shape {
  double bytes;        // per rank, in the operand dtype
  double chain_bytes;  // per rank, as the chain's partials travel (the accumulator's dtype)
  int ranks;
  std::string transport;  // "" in one process
};

Shape shape_of(const OpCall& call) {
  const double elements = static_cast<double>(call.inputs[0].elements());
  const double element = dtype_size(call.inputs[0].dtype);
  return {elements * element, elements * (call.treduce->accumulate.empty() ? element : 4.0),
          static_cast<int>(call.inputs.size()), call.treduce->transport};
}

// Microseconds to move `bytes` through one GPU's links (one direction), or its own memory.
double over_links(double bytes) { return bytes / (cost_model().link_gbps * 1e3); }
double over_hbm(double bytes) { return bytes / (cost_model().hbm_gbps * 1e3); }

// Calls issued back to back overlap the host's part of one with the GPUs' part of another: a
// call costs the larger of the two.
double overlapped(double host_us, double gpu_us) { return std::max(host_us, gpu_us); }

// The chain's pipeline: k steps per CTA, and N - 1 more while it fills, each at least a step's
// least time and at most a round through the link.
double chain_gpu_us(const OpCall& call, const Shape& s) {
  const CostModel& m = cost_model();
  const chain::Layout l = chain_layout(call);
  const double per_cta = std::ceil(static_cast<double>(l.steps) / std::max(1, l.ctas));
  const double round = s.chain_bytes * std::min<double>(l.ctas, l.steps) / std::max(1ll, l.steps);
  return m.chain_us + (per_cta + s.ranks - 1) * std::max(m.chain_step_us, over_links(round));
}

double root_pull_gpu_us(const Shape& s) {
  const CostModel& m = cost_model();
  return m.pull_us + (s.ranks - 1) * (m.pull_rank_us + over_links(s.bytes));
}

// Each worker pulls its shard from every rank and writes it into the root's dst, unpipelined:
// every GPU moves about (2N - 3) / (N - 1) tensors over its links.
double scatter_gather_gpu_us(const Shape& s) {
  const CostModel& m = cost_model();
  const double tensors = (2.0 * s.ranks - 3) / std::max(1, s.ranks - 1);
  return m.shards_us + (s.ranks - 1) * m.pull_rank_us + m.shards_traffic * tensors * over_links(s.bytes);
}

// In one process: the host launches every rank's part itself, and orders the ranks that run no
// kernel with two stream memory operations each.
double one_process_us(const std::string& algorithm, const OpCall& call, const Shape& s) {
  const CostModel& m = cost_model();
  const int lenders = s.ranks - 1;
  if (algorithm == "chain") return overlapped(m.call_us + s.ranks * m.launch_us, chain_gpu_us(call, s));
  if (algorithm == "scatter_gather") {
    return overlapped(m.call_us + lenders * m.launch_us + 2 * m.memop_us, scatter_gather_gpu_us(s));
  }
  return overlapped(m.call_us + m.launch_us + 2 * lenders * m.memop_us, root_pull_gpu_us(s));
}

double rendezvous_us(const Shape& s) {
  return cost_model().rendezvous_us + (s.ranks - 2) * cost_model().rendezvous_rank_us;
}

// CUDA IPC: every process launches its own part after the call's meeting; the ranks that run a
// kernel of their own (not root_pull's lenders, which arrive before the verdict) wait for it.
double cuda_ipc_us(const std::string& algorithm, const OpCall& call, const Shape& s) {
  const CostModel& m = cost_model();
  const double host = rendezvous_us(s) + m.launch_us + (algorithm == "root_pull" ? 0 : m.verdict_us);
  if (algorithm == "chain") return overlapped(host, chain_gpu_us(call, s));
  if (algorithm == "scatter_gather") return overlapped(host, scatter_gather_gpu_us(s));
  return overlapped(host, root_pull_gpu_us(s));
}

// NCCL: per chunk a group and a staged fold on the host of the busiest rank; on the GPUs each
// chunk's transfer and fold (serial on one stream), the chain's filling its hops.
double nccl_us(const std::string& algorithm, const Shape& s) {
  const CostModel& m = cost_model();
  const auto chunks = [](double bytes, double chunk) { return std::max(1.0, std::ceil(bytes / chunk)); };
  if (algorithm == "chain") {
    // the transport's chunk: an eighth of the tensor, 4 to 8 MiB (nccl.py's _chain_chunk_bytes)
    const double chunk = std::clamp(s.bytes / 8, 4194304.0, static_cast<double>(m.nccl_chunk_bytes));
    const double n = chunks(s.bytes, chunk);
    const double host = rendezvous_us(s) + (n + 1) * m.nccl_group_us + n * m.staged_fold_us;
    const double per_chunk = over_links(chunk) + over_hbm(3 * chunk);
    return overlapped(host, (n + s.ranks - 1) * per_chunk);
  }
  if (algorithm == "scatter_gather") {
    const double steps = 16;  // the transport's SHARD_STEPS
    const double host = rendezvous_us(s) + (steps + 1) * m.nccl_group_us + steps * m.staged_fold_us;
    return overlapped(host, scatter_gather_gpu_us(s) + over_hbm(s.ranks * s.bytes / (s.ranks - 1)));
  }
  const double n = chunks(s.bytes, static_cast<double>(m.nccl_chunk_bytes));
  const double host = rendezvous_us(s) + n * (m.nccl_group_us + m.staged_fold_us);
  return overlapped(host, root_pull_gpu_us(s) + over_hbm(s.ranks * s.bytes / n));
}

std::string format_us(double us) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f us", us);
  return text;
}

std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (u < 3 && bytes >= 1024) {
    bytes /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%g %s", std::round(bytes * 10) / 10, units[u]);
  return text;
}

}  // namespace

const CostModel& cost_model() {
  static const CostModel model;
  return model;
}

std::string why_not(const std::string& algorithm, const OpCall& call, const DispatchContext& ctx) {
  const int ranks = static_cast<int>(call.inputs.size());
  const std::string& transport = call.treduce->transport;
  const bool one_process_gpu = ctx.backend == "cuda" && transport.empty();
  if (algorithm == "scatter_gather") {
    if (ranks < 3) return std::to_string(ranks) + " ranks; scatter_gather needs 3 or more (with 2, root_pull's one hop is all)";
    std::vector<int> readers;
    for (int r = 0; r < ranks; ++r) {
      if (r != call.treduce->root) readers.push_back(r);
    }
    return missing_peer_access(call, ctx, readers);
  }
  if (algorithm != "chain") return "";
  if (transport == "nccl" && ranks < 2) return "1 rank: over nccl the chain needs a neighbour (root_pull copies)";
  if (transport == "nccl" && !call.treduce->accumulate.empty()) {
    return "accumulate='float32': over nccl the chain's partials travel in the operand dtype; root_pull and "
           "scatter_gather fold in float32";
  }
  if (!one_process_gpu) return "";
  const std::vector<int> order = fold_order(ranks, call.treduce->root);
  for (int p = 0; p < ranks; ++p) {
    for (int q = 0; q < p; ++q) {
      if (call.inputs[order[p]].device == call.inputs[order[q]].device) {
        return "ranks " + std::to_string(std::min(order[p], order[q])) + " and " +
               std::to_string(std::max(order[p], order[q])) + " share GPU " + std::to_string(call.inputs[order[p]].device) +
               ": the chain's kernels wait on each other, so every rank needs a GPU of its own";
      }
    }
    const int next = order[(p + 1) % ranks];
    if (!ctx.has_peer_access(order[p], next) || !ctx.has_peer_access(next, order[p])) {
      return "no peer access between GPU " + std::to_string(call.inputs[order[p]].device) + " and GPU " +
             std::to_string(call.inputs[next].device) + ", neighbours in the chain";
    }
  }
  return "";
}

std::vector<std::pair<std::string, double>> estimates(const OpCall& call, const DispatchContext& ctx) {
  std::vector<std::pair<std::string, double>> out;
  if (ctx.backend != "cuda") return {{"root_pull", 0.0}};
  const Shape s = shape_of(call);
  for (const char* algorithm : {"chain", "scatter_gather", "root_pull"}) {
    if (!why_not(algorithm, call, ctx).empty()) continue;
    const double us = s.transport == "nccl"       ? nccl_us(algorithm, s)
                      : s.transport == "cuda_ipc" ? cuda_ipc_us(algorithm, call, s)
                                                  : one_process_us(algorithm, call, s);
    out.emplace_back(algorithm, us);
  }
  return out;
}

std::string costlier(const std::string& algorithm, const OpCall& call, const DispatchContext& ctx) {
  if (ctx.backend != "cuda") {
    return algorithm == "root_pull" ? "" : "the cpu backend has one engine for every rank; root_pull moves least";
  }
  const auto all = estimates(call, ctx);
  if (all.empty()) return "";
  // the fastest; then the simplest (latest in variant order) within the margin of it
  auto fastest = std::min_element(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  auto best = fastest;
  for (auto it = fastest; it != all.end(); ++it) {
    if (it->second <= fastest->second * (1 + cost_model().simpler_margin)) best = it;
  }
  if (best->first == algorithm) return "";
  const auto mine = std::find_if(all.begin(), all.end(), [&](const auto& e) { return e.first == algorithm; });
  const Shape s = shape_of(call);
  const std::string where = std::to_string(s.ranks) + " ranks x " + bytes_text(s.bytes) + " (" +
                            (s.transport.empty() ? "one process" : s.transport) + ")";
  const std::string against = mine == all.end() ? "" : " against " + format_us(mine->second);
  const bool faster = mine == all.end() || best->second < mine->second;
  char margin[16];
  std::snprintf(margin, sizeof(margin), "%g%%", cost_model().simpler_margin * 100);
  return "the cost model expects " + best->first + (faster ? " faster" : " as fast (within " + std::string(margin) +
                                                                          ", and simpler)") +
         " here: " + format_us(best->second) + against + " for " + where;
}

std::string estimates_text(const OpCall& call, const DispatchContext& ctx) {
  if (ctx.backend != "cuda") return "cpu backend: root_pull";
  std::string text;
  for (const auto& [algorithm, us] : estimates(call, ctx)) text += (text.empty() ? "" : ", ") + algorithm + " " + format_us(us);
  return text;
}

}  // namespace tp::treduce
