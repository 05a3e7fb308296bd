// The CUDA executor of root_pull and scatter_gather in one process (the chain's:
// treduce_executor_chain.cc): rank r's tensor lives on its own GPU. Each worker of the plan
// (root_pull: the root; scatter_gather: every other rank) runs the treduce kernel over its shard
// of pieces on its own stream, reading the ranks' memory directly (peer access) and writing dst on
// the root's GPU. Every rank's stream is ordered: a worker starts once every rank's stream reached
// the call ("source ready"), and no rank's stream goes on before every worker is done ("source
// released"); so the call behaves like one operation on each rank's stream, with no host
// synchronisation. Where every GPU reaches every other, the GPUs order themselves through signal
// pads (signals.cuh, one per rank on its GPU): one launch per worker, and for every other rank two
// stream memory operations (its "ready" written into each worker's pad when its stream reaches the
// call, then a wait until each worker's "done" in its own pad): no host event, query or barrier,
// no kernel on a lender's GPU (an arrive kernel where a GPU cannot wait on memory). For a small
// message this is the one-shot path: the root pulls every rank's data in one step, ordered by
// flags alone. Without peer access the host orders them with events, and the ranks' data reaches
// the root by staged copies.
#include "backends/cuda/treduce_executor.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>

#include "backends/cuda/compiler.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/tile_executor.h"
#include "errors.h"
#include "tileprim/comm/signals.cuh"
#include "tileprim/comm/treduce_kernel.cuh"
#include "variants/comm/treduce_common.h"

namespace tp::cuda {

namespace {

constexpr int kThreads = 256;
constexpr const char* kTreduceKernel = "tp_treduce";  // the reduce kernel's __global__ function
constexpr int kCtasPerSm = 8;

std::string kernel_source(const Plan& plan, const TreducePlan& p) {
  std::ostringstream os;
  os << treduce_kernel_head(plan, p.dtype) << "#include <tileprim/comm/treduce_kernel.cuh>\n"
     << "#include <tileprim/comm/arrive_kernel.cuh>\n\n"
     << "extern \"C\" __global__ void __launch_bounds__(" << kThreads << ")\n"
     << kTreduceKernel << "(const tp::treduce::Launch a) {\n"
     << "  tp::treduce::run<" << p.functor << ", " << dtype_cuda_name(p.accumulate) << ", "
     << dtype_cuda_name(p.dtype) << ", " << p.order.size() << ", " << (p.pingpong ? "true" : "false") << ">(a);\n"
     << "}\n";
  return os.str();
}

BuiltKernel built(const Plan& plan, const std::string& arch) {
  BuiltKernel k;
  k.source.text = kernel_source(plan, plan.detail_as<TreducePlan>());
  k.source.function = kTreduceKernel;
  k.source.threads = kThreads;
  k.arch = arch;
  k.options = kernel_options(k.source.text);
  k.binary = compile_cached(k.source.text, arch, k.options);
  return k;
}

class CudaTreduceRunner : public Runner {
 public:
  CudaTreduceRunner(const Plan& plan) : detail_(plan.detail_as<TreducePlan>()) {
    Driver& d = Driver::get();
    for (const TileRef& t : plan.call.inputs) devices_.push_back(t.device);
    element_bytes_ = dtype_size(detail_.dtype);
    const int ranks = static_cast<int>(devices_.size());
    signalled_ = detail_.staged.empty();
    for (int w : detail_.workers) workers_mask_ |= 1u << w;
    for (int r = 0; r < ranks; ++r) {
      Member m;
      m.device = devices_[r];
      const auto& workers = detail_.workers;
      m.worker = static_cast<int>(std::find(workers.begin(), workers.end(), r) - workers.begin());
      if (m.worker == static_cast<int>(detail_.workers.size())) m.worker = -1;
      for (int q = 0; q < ranks && (m.worker >= 0 || signalled_); ++q) {  // whom it reads or signals
        if (std::find(detail_.staged.begin(), detail_.staged.end(), q) == detail_.staged.end()) d.enable_peer_access(m.device, devices_[q]);
      }
      binary_ = built(plan, compile_arch(plan.context.device_target(r))).binary;
      DeviceScope scope;
      scope.use(m.device);
      const std::string& image = binary_->cubin.empty() ? binary_->ptx : binary_->cubin;
      d.check(d.cuModuleLoadData(&m.module, image.c_str()), "cuModuleLoadData");
      d.check(d.cuModuleGetFunction(&m.reduce, m.module, kTreduceKernel), "cuModuleGetFunction");
      d.check(d.cuModuleGetFunction(&m.arrive, m.module, "tp_arrive"), "cuModuleGetFunction");
      m.ctas = kCtasPerSm * d.multiprocessors(m.device);
      if (signalled_ && m.worker >= 0) {
        m.arrivals = std::make_shared<DeviceBuffer>(sizeof(unsigned), m.device);
        m.arrivals->zero();
      }
      m.stream_waits = d.stream_waits(m.device);
      d.check(d.cuEventCreate(&m.ready, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      d.check(d.cuEventCreate(&m.done, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      members_.push_back(m);
    }
    for (int r = 0; signalled_ && r < ranks; ++r) {  // one process: rank r's pad on its GPU
      pads_.push_back(std::make_shared<DeviceBuffer>(sizeof(signals::Pad), devices_[r]));
      pads_.back()->zero();
    }
    const TileRef& source = plan.call.inputs[0];
    const auto [low, high] = element_extent(source.shape, source.strides);
    extent_low_ = low;
    for (int r : detail_.staged) {  // root_pull without peer access: copies on the root's GPU
      staged_.emplace(r, std::make_shared<DeviceBuffer>((high - low + 1) * element_bytes_,
                                                        devices_[detail_.workers[0]]));
    }
  }

  void run(const RunArgs& args) const override {
    std::lock_guard<std::mutex> lock(mutex_);  // one call at a time per runner: its pad, events, epochs
    if (!args.signal_pads.empty() && !signalled_) {
      throw ValueError("treduce across processes needs every rank's memory mapped on the root's GPU");
    }
    if (args.signal_pads.empty() && one_stream(args)) {
      run_in_stream_order(args);
    } else if (signalled_) {
      run_signalled(args);
    } else {
      run_with_events(args);
    }
  }

  std::vector<std::pair<std::string, std::string>> describe() const override {
    std::string ctas;
    for (const Member& m : members_) {
      if (m.worker >= 0) ctas += (ctas.empty() ? "" : ", ") + std::to_string(m.ctas);
    }
    const auto [begin, end] = detail_.shards[0];
    return {{"threads_per_cta", std::to_string(kThreads)},
            {"ctas_per_worker", ctas},
            {"pieces_per_cta_step", std::to_string(pieces_per_step(end - begin, members_[detail_.workers[0]].ctas))},
            {"ordering", signalled_ ? "signal pads on every rank's GPU: flags, no host events" : "events, host-ordered"},
            {"kernel", binary_->origin}};
  }

 private:
  struct Member {  // one rank's GPU, what runs there and its events
    int device = 0;
    int worker = -1;              // index into the plan's workers and shards, or -1
    CUmodule module = nullptr;    // lives as long as the process: runners are cached
    CUfunction reduce = nullptr;  // a worker's share
    CUfunction arrive = nullptr;  // a rank that is no worker: ready, then wait for the workers
    bool stream_waits = false;    // its streams can wait on memory (it orders itself by flags, no kernel)
    int ctas = 1;
    std::shared_ptr<DeviceBuffer> arrivals;
    CUevent ready = nullptr, done = nullptr;
  };

  CUstream stream_of(const RunArgs& args, int rank) const { return reinterpret_cast<CUstream>(args.streams[rank]); }

  // One launch per worker, in any order; every other rank orders its stream by flags: stream
  // memory operations in one process, an arrive kernel across processes (there the host abandons
  // a call by a flag in its memory, which a kernel polls) or where its GPU cannot wait on memory.
  // Across processes (args.signal_pads) this process runs rank args.self_rank's part only; the
  // others launch their own.
  void run_signalled(const RunArgs& args) const {
    Driver& d = Driver::get();
    DeviceScope scope;
    const bool one_process = args.signal_pads.empty();
    const int ranks = static_cast<int>(members_.size());
    if (!one_process && (args.self_rank < 0 || args.self_rank >= ranks)) {
      throw ValueError("self_rank: " + std::to_string(args.self_rank) + " is not one of the call's " +
                       std::to_string(ranks) + " ranks");
    }
    const auto runs_here = [&](int r) { return one_process || r == args.self_rank; };
    const unsigned long long epoch = one_process ? ++epoch_ : args.epoch;
    signals::PadSet pads{};  // rank r's pad
    for (int r = 0; r < ranks; ++r) {
      pads.pad[r] = reinterpret_cast<signals::Pad*>(one_process ? pads_[r]->pointer() : args.signal_pads[r]);
    }
    const unsigned ordered = one_process ? ordered_by_a_stream(args) : 0;
    for (int w : detail_.workers) {
      if (!runs_here(w)) continue;
      const Member& m = members_[w];
      scope.use(m.device);
      launch(m, args, stream_of(args, w), epoch, pads, ordered);
    }
    for (int r = 0; r < ranks; ++r) {
      const Member& m = members_[r];
      if (!runs_here(r) || m.worker >= 0 || (ordered >> r & 1u)) continue;
      scope.use(m.device);
      const CUstream stream = stream_of(args, r);
      if (one_process && m.stream_waits) {
        for (int w : detail_.workers) {
          d.check(d.cuStreamWriteValue64(stream, reinterpret_cast<CUdeviceptr>(&pads.pad[w]->ready[r]), epoch,
                                         CU_STREAM_WRITE_VALUE_DEFAULT),
                  "cuStreamWriteValue64");
        }
        for (int w : detail_.workers) {
          d.check(d.cuStreamWaitValue64(stream, reinterpret_cast<CUdeviceptr>(&pads.pad[r]->done[w]), epoch,
                                        CU_STREAM_WAIT_VALUE_GEQ),
                  "cuStreamWaitValue64");
        }
        continue;
      }
      const signals::Pad* own = pads.pad[r];
      const unsigned long long* abandoned = reinterpret_cast<const unsigned long long*>(args.abandoned);
      unsigned long long call_epoch = epoch, timeout = signals::timeout_ns(args.timeout_s);
      int self = r;
      unsigned workers = workers_mask_;
      void* params[] = {&pads, &own, &abandoned, &call_epoch, &self, &workers, &timeout};
      d.check(d.cuLaunchKernel(m.arrive, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr), "cuLaunchKernel");
    }
  }

  // The ranks (bit r) that are no workers and are ordered by another's stream, in one process: a
  // rank on the stream of a worker, or of a lower such rank. Its part of the call is that stream's
  // order (a wait of its own there would hold up the worker queued behind it).
  unsigned ordered_by_a_stream(const RunArgs& args) const {
    unsigned ordered = 0;
    const int ranks = static_cast<int>(members_.size());
    for (int r = 0; r < ranks; ++r) {
      if (members_[r].worker >= 0) continue;
      for (int q = 0; q < ranks; ++q) {
        if (q != r && members_[q].device == members_[r].device && args.streams[q] == args.streams[r] &&
            (members_[q].worker >= 0 || q < r)) {
          ordered |= 1u << r;
          break;
        }
      }
    }
    return ordered;
  }

  // Every rank's tensor on one GPU, read in one stream's order (e.g. the NCCL transport's staged
  // chunks): that order is all the ordering there is to do, and an arrive kernel there would wait
  // for a worker queued behind it.
  bool one_stream(const RunArgs& args) const {
    for (size_t r = 1; r < members_.size(); ++r)
      if (members_[r].device != members_[0].device || args.streams[r] != args.streams[0]) return false;
    return true;
  }

  void run_in_stream_order(const RunArgs& args) const {
    DeviceScope scope;
    scope.use(members_[0].device);
    for (int w : detail_.workers) launch(members_[w], args, stream_of(args, w), 0, {});
  }

  // Events: a worker waits for every other rank's stream; every rank waits for the workers.
  void run_with_events(const RunArgs& args) const {
    Driver& d = Driver::get();
    DeviceScope scope;
    const int ranks = static_cast<int>(members_.size());
    for (int r = 0; r < ranks; ++r) {
      if (!read_by_another(r)) continue;
      scope.use(members_[r].device);
      d.check(d.cuEventRecord(members_[r].ready, stream_of(args, r)), "cuEventRecord");
    }
    for (int w : detail_.workers) {
      const Member& m = members_[w];
      scope.use(m.device);
      for (int r = 0; r < ranks; ++r) {
        if (r != w) d.check(d.cuStreamWaitEvent(stream_of(args, w), members_[r].ready, 0), "cuStreamWaitEvent");
      }
      launch(m, args, stream_of(args, w), 0, {});
      d.check(d.cuEventRecord(m.done, stream_of(args, w)), "cuEventRecord");
    }
    for (int r = 0; r < ranks; ++r) {
      for (int w : detail_.workers) {
        if (w == r) continue;
        scope.use(members_[r].device);
        d.check(d.cuStreamWaitEvent(stream_of(args, r), members_[w].done, 0), "cuStreamWaitEvent");
      }
    }
  }

  bool read_by_another(int rank) const {
    return std::any_of(detail_.workers.begin(), detail_.workers.end(), [&](int w) { return w != rank; });
  }

  // Small pieces are folded several at a time by a CTA, as long as every CTA still gets a step.
  int pieces_per_step(long long pieces, int ctas) const {
    const treduce::Geometry& g = detail_.geometry;
    const long long piece_elements = g.rows_per_piece * std::min(g.tile_cols, g.shape[4]);
    long long k = std::clamp(treduce::kStepElements / std::max(1ll, piece_elements), 1ll,
                             static_cast<long long>(treduce::kMaxPiecesPerStep));
    while (k > 1 && (pieces + k - 1) / k < ctas) k /= 2;
    return static_cast<int>(k);
  }

  void launch(const Member& m, const RunArgs& args, CUstream stream, unsigned long long epoch,
              const signals::PadSet& pads, unsigned ready = 0) const {
    Driver& d = Driver::get();
    treduce::Launch launch_args{};
    bool aligned = detail_.geometry.src[4] == 1 && detail_.geometry.dst[4] == 1;
    for (size_t i = 0; i < detail_.order.size(); ++i) {
      const int r = detail_.order[i];
      CUdeviceptr src = args.inputs[r].data;
      if (auto it = staged_.find(r); it != staged_.end()) {
        const CUdeviceptr from = src + extent_low_ * element_bytes_;
        d.check(d.cuMemcpyPeerAsync(it->second->pointer(), d.context(m.device), from, d.context(devices_[r]),
                                    it->second->bytes(), stream),
                "cuMemcpyPeerAsync");
        src = it->second->pointer() - extent_low_ * element_bytes_;
      }
      launch_args.src[i] = reinterpret_cast<const void*>(src);
      aligned = aligned && src % 16 == 0;
    }
    launch_args.dst = reinterpret_cast<void*>(args.output.data);
    launch_args.g = detail_.geometry;
    launch_args.ranks = static_cast<int>(detail_.order.size());
    launch_args.vectors = aligned && args.output.data % 16 == 0;
    launch_args.piece_begin = detail_.shards[m.worker].first;
    launch_args.piece_end = detail_.shards[m.worker].second;
    const bool signalled = pads.pad[0] != nullptr;  // no pads: the host orders the call
    if (signalled) {
      std::copy(std::begin(pads.pad), std::end(pads.pad), launch_args.pads);
      launch_args.timeout_ns = signals::timeout_ns(args.timeout_s);
      launch_args.abandoned = reinterpret_cast<const unsigned long long*>(args.abandoned);
      launch_args.arrivals = reinterpret_cast<unsigned*>(m.arrivals->pointer());
      launch_args.epoch = epoch;
      launch_args.self = detail_.workers[m.worker];
      launch_args.workers = workers_mask_;
      launch_args.ready = ready;
    }
    const long long pieces = launch_args.piece_end - launch_args.piece_begin;
    if (pieces <= 0 && !signalled) return;  // a signalled worker still takes part
    launch_args.pieces_per_step = pieces_per_step(pieces, m.ctas);
    void* params[] = {&launch_args};
    const long long steps = (pieces + launch_args.pieces_per_step - 1) / launch_args.pieces_per_step;
    const long long ctas = std::max(1ll, std::min<long long>(steps, m.ctas));
    d.check(d.cuLaunchKernel(m.reduce, static_cast<unsigned>(ctas), 1, 1, kThreads, 1, 1, 0, stream, params, nullptr),
            "cuLaunchKernel");
  }

  TreducePlan detail_;
  std::vector<int> devices_;
  std::vector<Member> members_;  // one per rank
  bool signalled_ = false;
  unsigned workers_mask_ = 0;
  std::vector<std::shared_ptr<DeviceBuffer>> pads_;  // one process: rank r's signal pad, on its GPU
  mutable unsigned long long epoch_ = 0;
  int element_bytes_ = 4;
  long long extent_low_ = 0;
  std::shared_ptr<const CompiledKernel> binary_;
  std::map<int, std::shared_ptr<DeviceBuffer>> staged_;
  mutable std::mutex mutex_;
};

class CudaTreduceExecutor : public CudaExecutor {
 public:
  BuiltKernel build(const Plan& plan, const std::string& arch) const override { return built(plan, arch); }
  std::shared_ptr<const Runner> bind(const Plan& plan) const override {
    require_device_ranks(plan);
    return std::make_shared<CudaTreduceRunner>(plan);
  }
};

}  // namespace

void require_device_ranks(const Plan& plan) {
  for (const TileRef& t : plan.call.inputs) {
    if (t.device < 0) {
      throw ValueError("backend: 'cuda' runs treduce on device arrays (rank r's tensor on its GPU); "
                       "pass them, or use backend='cpu' for NumPy arrays");
    }
  }
}

std::string treduce_kernel_head(const Plan& plan, DType dtype) {
  std::string head = "// tileprim treduce kernel: " + plan.call.str() + " [" + plan.variant + "]\n";
  if (dtype == DType::float16) head += "#define TP_WITH_FP16 1\n";
  if (dtype == DType::bfloat16) head += "#define TP_WITH_BF16 1\n";
  return head;
}

void register_cuda_treduce(ExecutorTable& table) {
  table.add("root_pull", "cuda", std::make_unique<CudaTreduceExecutor>());
  table.add("scatter_gather", "cuda", std::make_unique<CudaTreduceExecutor>());
  table.add("chain", "cuda", chain_executor());
}

}  // namespace tp::cuda
