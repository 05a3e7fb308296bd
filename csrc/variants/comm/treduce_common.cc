#include "variants/comm/treduce_common.h"

#include <algorithm>
#include <memory>

#include "errors.h"
#include "variants/comm/treduce_choice.h"

namespace tp {

namespace {

// A piece holds about this many elements: enough work for a CTA of 256 threads, 16 bytes each.
constexpr long long kPieceElements = 4096;

// The chain's smallest step (a slot holds kSlotBytes at most): a step is a CTA's unit of work
// between two flags, so below this its flags would cost more than its bytes.
constexpr long long kChainMinStepBytes = 4 << 10;

// The call's tensors as 5-D views: shape and strides, no chunks yet.
treduce::Geometry view_of(const OpCall& call) {
  treduce::Geometry g{};
  const TileRef& src = call.inputs[0];
  const int pad = treduce::kDims - static_cast<int>(src.shape.size());
  for (int d = 0; d < treduce::kDims; ++d) {
    const int k = d - pad;
    g.shape[d] = k < 0 ? 1 : src.shape[k];
    g.src[d] = k < 0 ? 0 : src.strides[k];
    g.dst[d] = k < 0 ? 0 : call.output.strides[k];
  }
  return g;
}

treduce::Geometry geometry_of(const OpCall& call, long long processors) {
  treduce::Geometry g = view_of(call);
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

// How the ranks' data meets, in words (tp.plan's "transport").
std::string transport_text(const Plan& plan, const TreducePlan& detail, const std::string& algorithm) {
  const std::string& transport = plan.call.treduce->transport;
  const bool chain = algorithm == "chain";
  if (transport == "shm") {
    return "shared memory between processes: each rank copies its source in, the root folds them";
  }
  if (transport == "cuda_ipc" && chain) {
    return "CUDA IPC between processes: each rank maps its successor's staging and flags; every rank runs its "
           "step of the chain on its own GPU, the last into the root's dst";
  }
  if (transport == "cuda_ipc") {
    return "CUDA IPC between processes: the root maps every rank's buffer and loads it over NVLink/PCIe; "
           "ready/released flags in the root's GPU memory";
  }
  if (transport == "nccl" && chain) {
    return "NCCL between processes: the root sends its packed source to the next rank chunk by chunk; each rank "
           "receives the partial (ncclRecv), folds its own chunk in and sends it on (ncclSend), one chunk behind, "
           "the last to the root";
  }
  if (transport == "nccl" && algorithm == "scatter_gather") {
    return "NCCL between processes: every rank sends each worker its slice of that worker's shard (its source "
           "packed), step by step; the worker folds its shard and sends it to the root, one step behind, in the "
           "same NCCL group as the next step's slices";
  }
  if (transport == "nccl") {
    return "NCCL between processes: each rank sends its packed source to the root chunk by chunk (ncclSend); the "
           "root receives every rank's next chunk into ping/pong staging while it folds the last";
  }
  if (plan.context.backend != "cuda") return "host memory";
  if (chain) return "peer access: each GPU stores its step's partial into the next GPU's staging (NVLink/PCIe)";
  return detail.staged.empty() ? "peer access (loads over NVLink/PCIe)" : "staged copies for ranks without peer access";
}

}  // namespace

std::vector<int> fold_order(int ranks, int root) {
  std::vector<int> order = {root};
  for (int r = 0; r < ranks; ++r) {
    if (r != root) order.push_back(r);
  }
  return order;
}

treduce::chain::Layout chain_layout(const OpCall& call) {
  namespace chain = treduce::chain;
  chain::Layout l{};
  l.g = view_of(call);
  const long long element = dtype_size(call.inputs[0].dtype);
  const long long acc = call.treduce->accumulate.empty() ? element : 4;  // accumulate="float32"
  const long long vector = 16 / element;
  const long long bytes = l.g.outer() * l.g.shape[3] * l.g.shape[4] * acc;
  // a round (ctas x step bytes: what the chain keeps in flight per link) of kRoundBytes, or the
  // whole tensor where that is less (one step per CTA: the fewest hops' latencies), in steps of
  // up to a slot (chain.cuh says why)
  const long long round = std::clamp(bytes, kChainMinStepBytes, chain::kRoundBytes);
  const long long step_bytes = std::clamp(round / chain::kMaxCtas, kChainMinStepBytes, chain::kSlotBytes);
  const long long step = std::max(vector, step_bytes / acc / vector * vector);  // elements, whole vectors
  // a segment: a whole row, or a step's worth of one
  const long long cols = std::max(1ll, std::min(l.g.shape[4], step));
  l.g.tile_rows = 1;
  l.g.tile_cols = cols;
  l.g.row_chunks = l.g.shape[3];
  l.g.col_chunks = (l.g.shape[4] + cols - 1) / cols;
  l.g.rows_per_piece = 1;
  l.g.pieces_per_chunk = 1;
  l.slot_cols = chain::align_up(cols, vector);
  l.pieces_per_step = std::max(1ll, std::min<long long>(chain::kMaxSegmentsPerStep, step / l.slot_cols));
  l.steps = (l.g.pieces() + l.pieces_per_step - 1) / l.pieces_per_step;
  l.ctas = static_cast<int>(std::clamp(std::min(round / step_bytes, l.steps), 1ll, 1ll * chain::kMaxCtas));
  return l;
}

void plan_treduce(Plan& plan, std::shared_ptr<TreducePlan> detail, const std::vector<int>& workers,
                  const std::string& algorithm) {
  const OpCall& call = plan.call;
  const TreduceOptions& options = *call.treduce;
  const int ranks = static_cast<int>(call.inputs.size());
  const int root = options.root;
  const bool gpu = plan.context.backend == "cuda";
  const bool chain = algorithm == "chain";
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
  if (gpu && !chain) {  // the chain reads no other rank's data: its neighbours push into its staging
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
  plan.set("workers", std::vector<long long>(workers.begin(), workers.end()));
  if (chain) {
    const treduce::chain::Layout& l = static_cast<const ChainPlan&>(*detail).layout;
    plan.set("steps", l.steps);
    plan.set("step_elements", l.pieces_per_step * l.slot_cols);
    plan.set("segments_per_step", l.pieces_per_step);
    plan.set("buffers", std::string("every rank's staging: ") + std::to_string(treduce::chain::kSlots) +
                            " slots per CTA, its predecessor pushing, the partial in " + dtype_name(detail->accumulate));
    if (gpu) plan.set("ctas", static_cast<long long>(l.ctas));
  } else {
    plan.set("pieces", pieces);
    plan.set("rows_per_piece", g.rows_per_piece);
    plan.set("buffers", std::string(detail->pingpong ? "acc/ping/pong" : "acc/recv"));
    if (gpu) {
      plan.set("ctas", std::min(pieces, 8ll * std::max(1, plan.context.multiprocessors)));
      plan.set("stages", detail->pingpong ? static_cast<long long>(ranks) : 1ll);
    }
  }
  plan.set("transport", transport_text(plan, *detail, algorithm));
  plan.set("estimates", treduce::estimates_text(call, plan.context));
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
