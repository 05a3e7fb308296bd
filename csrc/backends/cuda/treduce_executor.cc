// The CUDA executor of both treduce variants in one process: rank r's tensor lives on its own
// GPU. Each worker of the plan (root_pull: the root; scatter_gather: every other rank) runs
// the treduce kernel over its shard of pieces on its own stream, reading the ranks' memory
// directly (peer access) and writing dst on the root's GPU. Streams are ordered with events:
// a worker starts once every rank's current stream reached the call ("source ready"), and
// every rank's stream continues once every worker is done ("source released"), so the call
// behaves like one operation on each rank's stream, with no host synchronisation.
#include "backends/cuda/treduce_executor.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>

#include "backends/cuda/compiler.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/tile_executor.h"
#include "errors.h"
#include "tileprim/comm/treduce_kernel.cuh"
#include "variants/comm/treduce_common.h"

namespace tp::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kCtasPerSm = 8;

std::string functor_of(ReduceKind k) {
  switch (k) {
    case ReduceKind::sum: return "tp::reduce_op::Sum";
    case ReduceKind::max: return "tp::reduce_op::Max";
    default: return "tp::reduce_op::Min";
  }
}

std::string kernel_source(const Plan& plan, const TreducePlan& p) {
  std::ostringstream os;
  os << "// tileprim treduce kernel: " << plan.call.str() << " [" << plan.variant << "]\n";
  if (p.dtype == DType::float16) os << "#define TP_WITH_FP16 1\n";
  if (p.dtype == DType::bfloat16) os << "#define TP_WITH_BF16 1\n";
  os << "#include <tileprim/comm/treduce_kernel.cuh>\n\n"
     << "extern \"C\" __global__ void __launch_bounds__(" << kThreads << ")\n"
     << "tp_treduce(const tp::treduce::Launch a) {\n"
     << "  tp::treduce::run_pieces<" << functor_of(p.kind) << ", " << dtype_cuda_name(p.accumulate) << ", "
     << dtype_cuda_name(p.dtype) << ", " << p.order.size() << ", " << (p.pingpong ? "true" : "false") << ">(a);\n"
     << "}\n";
  return os.str();
}

// Element offsets a strided tensor spans: [low, high].
std::pair<long long, long long> extent(const treduce::Geometry& g) {
  long long low = 0, high = 0;
  for (int d = 0; d < treduce::kDims; ++d) {
    const long long reach = (g.shape[d] - 1) * g.src[d];
    (reach < 0 ? low : high) += reach;
  }
  return {low, high};
}

BuiltKernel built(const Plan& plan, const std::string& arch) {
  BuiltKernel k;
  k.source.text = kernel_source(plan, plan.detail_as<TreducePlan>());
  k.source.threads = kThreads;
  k.arch = arch;
  k.options = kernel_options(k.source.text);
  k.binary = compile_cached(k.source.text, arch, k.options);
  return k;
}

class CudaTreduceRunner : public Runner {
 public:
  CudaTreduceRunner(const Plan& plan) : p_(plan.detail_as<TreducePlan>()) {
    for (const TileRef& t : plan.call.inputs) devices_.push_back(t.device);
    element_bytes_ = dtype_size(p_.dtype);
    Driver& d = Driver::get();
    for (int w : p_.workers) {
      const int device = devices_[w];
      for (size_t r = 0; r < devices_.size(); ++r) {
        if (std::find(p_.staged.begin(), p_.staged.end(), static_cast<int>(r)) == p_.staged.end()) {
          d.enable_peer_access(device, devices_[r]);
        }
      }
      binary_ = built(plan, arch_for_compute_capability(d.compute_capability(device))).binary;
      Worker k;
      k.device = device;
      DeviceScope scope;
      scope.use(device);
      const std::string& image = binary_->cubin.empty() ? binary_->ptx : binary_->cubin;
      d.check(d.cuModuleLoadData(&k.module, image.c_str()), "cuModuleLoadData");
      d.check(d.cuModuleGetFunction(&k.function, k.module, "tp_treduce"), "cuModuleGetFunction");
      k.ctas = kCtasPerSm * d.multiprocessors(device);
      workers_.push_back(k);
    }
    const auto [low, high] = extent(p_.geometry);
    extent_low_ = low;
    for (int r : p_.staged) {  // root_pull without peer access: copies on the root's GPU
      staged_.emplace(r, std::make_shared<DeviceBuffer>((high - low + 1) * element_bytes_, devices_[p_.workers[0]]));
    }
    for (int device : devices_) {  // per rank: two ranks may share a GPU, not a stream
      DeviceScope scope;
      scope.use(device);
      ready_.emplace_back();
      done_.emplace_back();
      d.check(d.cuEventCreate(&ready_.back(), CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      d.check(d.cuEventCreate(&done_.back(), CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    }
  }

  void run(const RunArgs& args) const override {
    std::lock_guard<std::mutex> lock(mutex_);  // one call at a time uses the runner's events
    Driver& d = Driver::get();
    DeviceScope scope;
    auto stream = [&](int rank) { return reinterpret_cast<CUstream>(args.streams[rank]); };
    const int ranks = static_cast<int>(devices_.size());
    // source ready: every rank a worker other than itself reads has reached the call on its stream
    for (int r = 0; r < ranks; ++r) {
      if (!read_by_another(r)) continue;
      scope.use(devices_[r]);
      d.check(d.cuEventRecord(ready_[r], stream(r)), "cuEventRecord");
    }
    for (size_t k = 0; k < workers_.size(); ++k) {
      const int w = p_.workers[k];
      scope.use(workers_[k].device);
      for (int r = 0; r < ranks; ++r) {
        if (r != w) d.check(d.cuStreamWaitEvent(stream(w), ready_[r], 0), "cuStreamWaitEvent");
      }
      launch(k, args, stream(w));
      d.check(d.cuEventRecord(done_[w], stream(w)), "cuEventRecord");
    }
    // source released: no rank's stream moves on before every worker is done with its data
    for (int r = 0; r < ranks; ++r) {
      for (int w : p_.workers) {
        if (w == r) continue;
        scope.use(devices_[r]);
        d.check(d.cuStreamWaitEvent(stream(r), done_[w], 0), "cuStreamWaitEvent");
      }
    }
  }

  std::vector<std::pair<std::string, std::string>> describe() const override {
    std::string ctas;
    for (const Worker& w : workers_) ctas += (ctas.empty() ? "" : ", ") + std::to_string(w.ctas);
    return {{"threads_per_cta", std::to_string(kThreads)}, {"ctas_per_worker", ctas}, {"kernel", binary_->origin}};
  }

 private:
  struct Worker {
    int device = 0;
    CUmodule module = nullptr;  // lives as long as the process: runners are cached
    CUfunction function = nullptr;
    int ctas = 1;
  };
  bool read_by_another(int rank) const {
    return std::any_of(p_.workers.begin(), p_.workers.end(), [&](int w) { return w != rank; });
  }

  void launch(size_t k, const RunArgs& args, CUstream stream) const {
    Driver& d = Driver::get();
    const Worker& w = workers_[k];
    treduce::Launch a{};
    bool aligned = p_.geometry.src[4] == 1 && p_.geometry.dst[4] == 1;
    for (size_t i = 0; i < p_.order.size(); ++i) {
      const int r = p_.order[i];
      CUdeviceptr src = args.inputs[r].data;
      if (auto it = staged_.find(r); it != staged_.end()) {
        const CUdeviceptr from = src + extent_low_ * element_bytes_;
        d.check(d.cuMemcpyPeerAsync(it->second->pointer(), d.context(w.device), from, d.context(devices_[r]),
                                    it->second->bytes(), stream),
                "cuMemcpyPeerAsync");
        src = it->second->pointer() - extent_low_ * element_bytes_;
      }
      a.src[i] = reinterpret_cast<const void*>(src);
      aligned = aligned && src % 16 == 0;
    }
    a.dst = reinterpret_cast<void*>(args.output.data);
    a.g = p_.geometry;
    a.ranks = static_cast<int>(p_.order.size());
    a.vectors = aligned && args.output.data % 16 == 0;
    a.piece_begin = p_.shards[k].first;
    a.piece_end = p_.shards[k].second;
    const long long pieces = a.piece_end - a.piece_begin;
    if (pieces <= 0) return;
    void* params[] = {&a};
    d.check(d.cuLaunchKernel(w.function, static_cast<unsigned>(std::min<long long>(pieces, w.ctas)), 1, 1, kThreads,
                             1, 1, 0, stream, params, nullptr),
            "cuLaunchKernel");
  }

  TreducePlan p_;
  std::vector<int> devices_;
  int element_bytes_ = 4;
  long long extent_low_ = 0;
  std::shared_ptr<const CompiledKernel> binary_;
  std::vector<Worker> workers_;
  std::map<int, std::shared_ptr<DeviceBuffer>> staged_;
  std::vector<CUevent> ready_, done_;  // per rank: its stream reached the call / its kernel finished
  mutable std::mutex mutex_;
};

class CudaTreduceExecutor : public CudaExecutor {
 public:
  BuiltKernel build(const Plan& plan, const std::string& arch) const override { return built(plan, arch); }
  std::shared_ptr<const Runner> bind(const Plan& plan) const override {
    for (const TileRef& t : plan.call.inputs) {
      if (t.device < 0) {
        throw ValueError("backend: 'cuda' runs treduce on device arrays (rank r's tensor on its GPU); "
                         "pass them, or use backend='cpu' for NumPy arrays");
      }
    }
    return std::make_shared<CudaTreduceRunner>(plan);
  }
};

}  // namespace

void register_cuda_treduce(ExecutorTable& table) {
  table.add("root_pull", "cuda", std::make_unique<CudaTreduceExecutor>());
  table.add("scatter_gather", "cuda", std::make_unique<CudaTreduceExecutor>());
}

}  // namespace tp::cuda
