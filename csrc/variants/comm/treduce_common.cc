#include "variants/comm/treduce_common.h"

#include <algorithm>
#include <memory>

#include "errors.h"

namespace tp {

namespace {

// A piece holds about this many elements: enough work for a CTA of 256 threads, 16 bytes each.
constexpr long long kPieceElements = 4096;

std::vector<int> fold_order(int ranks, int root) {
  std::vector<int> order = {root};
  for (int r = 0; r < ranks; ++r) {
    if (r != root) order.push_back(r);
  }
  return order;
}

treduce::Geometry geometry_of(const OpCall& call, long long processors) {
  treduce::Geometry g{};
  const TileRef& src = call.inputs[0];
  const int pad = treduce::kDims - static_cast<int>(src.shape.size());
  for (int d = 0; d < treduce::kDims; ++d) {
    const int k = d - pad;
    g.shape[d] = k < 0 ? 1 : src.shape[k];
    g.src[d] = k < 0 ? 0 : src.strides[k];
    g.dst[d] = k < 0 ? 0 : call.output.strides[k];
  }
  // A tile past the tensor is one (partial) chunk of it: the tensor's extent, so no count or
  // buffer grows with the tile (any int64 is a tile) and the chunks are the same.
  g.tile_rows = std::min(call.treduce->tile_rows, std::max(1ll, g.shape[3]));
  g.tile_cols = std::min(call.treduce->tile_cols, std::max(1ll, g.shape[4]));
  g.row_chunks = (g.shape[3] + g.tile_rows - 1) / g.tile_rows;
  g.col_chunks = (g.shape[4] + g.tile_cols - 1) / g.tile_cols;
  const long long chunk_rows = std::min(g.tile_rows, g.shape[3]), chunk_cols = std::min(g.tile_cols, g.shape[4]);
  // pieces of whole rows of a chunk; smaller ones when that is what spreads the work over the processors
  g.rows_per_piece = std::max(1ll, std::min(chunk_rows, kPieceElements / std::max(1ll, chunk_cols)));
  auto pieces = [&](long long rows) { return g.outer() * g.row_chunks * g.col_chunks * ((chunk_rows + rows - 1) / rows); };
  while (g.rows_per_piece > 1 && pieces(g.rows_per_piece) < 2 * processors) g.rows_per_piece = (g.rows_per_piece + 1) / 2;
  g.pieces_per_chunk = (chunk_rows + g.rows_per_piece - 1) / g.rows_per_piece;
  return g;
}

std::string tile_text(const TreduceOptions& options) {
  return std::to_string(options.tile_rows) + " x " + std::to_string(options.tile_cols);
}

}  // namespace

void plan_treduce(Plan& plan, const std::vector<int>& workers, const std::string& algorithm) {
  const OpCall& call = plan.call;
  const TreduceOptions& options = *call.treduce;
  auto detail = std::make_shared<TreducePlan>();
  const int ranks = static_cast<int>(call.inputs.size());
  const int root = options.root;
  const bool gpu = plan.context.backend == "cuda";
  detail->geometry = geometry_of(call, gpu ? std::max(1, plan.context.multiprocessors) : 1);
  detail->order = fold_order(ranks, root);
  const OpDef& op = op_def(options.op);  // validate_call made sure it is a reduction
  detail->functor = op.device_fn;
  detail->dtype = call.inputs[0].dtype;
  detail->accumulate = options.accumulate.empty() ? detail->dtype : DType::float32;
  detail->pingpong = options.pingpong;
  detail->workers = workers;
  const long long pieces = detail->geometry.pieces();
  for (size_t w = 0; w < workers.size(); ++w) {
    detail->shards.emplace_back(pieces * static_cast<long long>(w) / static_cast<long long>(workers.size()),
                           pieces * static_cast<long long>(w + 1) / static_cast<long long>(workers.size()));
  }
  if (gpu) {
    for (int w : workers) {
      for (int r = 0; r < ranks; ++r) {
        if (!plan.context.has_peer_access(w, r) &&
            std::find(detail->staged.begin(), detail->staged.end(), r) == detail->staged.end()) {
          detail->staged.push_back(r);
        }
      }
    }
  }
  const treduce::Geometry& g = detail->geometry;
  plan.set("algorithm", algorithm);
  plan.set("ranks", static_cast<long long>(ranks));
  plan.set("root", static_cast<long long>(root));
  plan.set("order", std::vector<long long>(detail->order.begin(), detail->order.end()));
  plan.set("chunk", tile_text(options));
  plan.set("chunks", g.chunks());
  plan.set("pieces", pieces);
  plan.set("rows_per_piece", g.rows_per_piece);
  plan.set("workers", std::vector<long long>(workers.begin(), workers.end()));
  plan.set("buffers", std::string(detail->pingpong ? "acc/ping/pong" : "acc/recv"));
  if (gpu) {
    plan.set("ctas", std::min(pieces, 8ll * std::max(1, plan.context.multiprocessors)));
    plan.set("stages", detail->pingpong ? static_cast<long long>(ranks) : 1ll);
    plan.set("transport", std::string(detail->staged.empty() ? "peer access (loads over NVLink/PCIe)"
                                                         : "staged copies for ranks without peer access"));
  } else {
    plan.set("transport", std::string("host memory"));
  }
  if (options.transport == "shm") {
    plan.set("transport", std::string("shared memory between processes: each rank copies its source in, the "
                                      "root folds them"));
  } else if (options.transport == "cuda_ipc") {
    plan.set("transport", std::string("CUDA IPC between processes: the root maps every rank's buffer and loads "
                                      "it over NVLink/PCIe; ready/released flags in the root's GPU memory"));
  } else if (options.transport == "nccl" && algorithm == "scatter_gather") {
    plan.set("transport", std::string("NCCL between processes: every rank sends each worker its slice of that "
                                      "worker's shard (its source packed), step by step; the worker folds its shard "
                                      "and sends it to the root, one step behind, in the same NCCL group as the "
                                      "next step's slices"));
  } else if (options.transport == "nccl") {
    plan.set("transport", std::string("NCCL between processes: each rank sends its packed source to the root "
                                      "chunk by chunk (ncclSend); the root receives every rank's next chunk into "
                                      "ping/pong staging while it folds the last"));
  }
  plan.note("order", "root first, then the other ranks ascending, at every element: bitwise the same whatever "
                     "algorithm, backend, tile or buffering");
  plan.note("accumulate_dtype", dtype_name(detail->accumulate));
  if (detail->accumulate != detail->dtype) plan.note("rounding", "one rounding to the operand dtype at the end");
  plan.note("nan", op.reduction->nan);
  plan.detail = detail;
}

std::pair<long long, long long> element_extent(const std::vector<long long>& shape,
                                               const std::vector<long long>& strides) {
  long long low = 0, high = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    const long long reach = (shape[d] - 1) * strides[d];
    (reach < 0 ? low : high) += reach;
  }
  return {low, high};
}

std::string missing_peer_access(const OpCall& call, const DispatchContext& ctx, const std::vector<int>& readers) {
  if (ctx.backend != "cuda") return "";
  for (int w : readers) {
    for (size_t r = 0; r < call.inputs.size(); ++r) {
      if (!ctx.has_peer_access(w, r)) {
        return "no peer access between GPU " + std::to_string(call.inputs[w].device) + " and GPU " +
               std::to_string(call.inputs[r].device);
      }
    }
  }
  return "";
}

}  // namespace tp
