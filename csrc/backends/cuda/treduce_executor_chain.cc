// The CUDA executor of treduce's chain (tileprim/comm/chain.cuh): one kernel per rank, on the
// rank's own GPU and stream, ordered by flags between neighbours only. No rank reads another's
// source, so no rank's stream waits for another's: a rank's kernel starts once its stream
// reaches the call (its source complete), reads its source before it ends (so the stream may
// overwrite it after), and the root's kernel ends once the last rank has written all of dst.
// In one process the runner owns every rank's chain memory (on its GPU); across processes
// (CUDA IPC) each rank's lies after its signal pad, mapped in every process, and this process
// launches its own rank's part only.
//
// Every rank's CTAs wait on the same-numbered CTAs of its neighbours, so all of them must be
// resident at once: a chain runs few CTAs (chain::kMaxCtas at most, one per SM), checked against
// what the kernel's occupancy allows at bind time.
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "backends/cuda/compiler.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/tile_executor.h"
#include "backends/cuda/treduce_executor.h"
#include "errors.h"
#include "tileprim/comm/chain.cuh"
#include "variants/comm/treduce_common.h"

namespace tp::cuda {

namespace {

namespace chain = treduce::chain;

constexpr const char* kChainKernel = "tp_treduce_chain";

BuiltKernel built(const Plan& plan, const std::string& arch) {
  const TreducePlan& p = plan.detail_as<TreducePlan>();
  std::ostringstream os;
  os << treduce_kernel_head(plan, p.dtype) << "#include <tileprim/comm/chain.cuh>\n\n"
     << "extern \"C\" __global__ void __launch_bounds__(" << chain::kThreads << ", 1)\n"
     << kChainKernel << "(const tp::treduce::chain::Launch a) {\n"
     << "  tp::treduce::chain::run<" << p.functor << ", " << dtype_cuda_name(p.accumulate) << ", "
     << dtype_cuda_name(p.dtype) << ">(a);\n"
     << "}\n";
  BuiltKernel k;
  k.source.text = os.str();
  k.source.function = kChainKernel;
  k.source.threads = chain::kThreads;
  k.arch = arch;
  k.options = kernel_options(k.source.text);
  k.binary = compile_cached(k.source.text, arch, k.options);
  return k;
}

class ChainRunner : public Runner {
 public:
  explicit ChainRunner(const Plan& plan) : detail_(plan.detail_as<ChainPlan>()) {
    Driver& d = Driver::get();
    const int ranks = static_cast<int>(detail_.order.size());
    for (const TileRef& t : plan.call.inputs) devices_.push_back(t.device);
    const chain::Layout& l = detail_.layout;
    DeviceScope scope;
    for (int r = 0; r < ranks; ++r) {
      const int device = devices_[r];
      if (!functions_.count(device)) {
        const auto binary = built(plan, compile_arch(plan.context.device_target(r))).binary;
        const std::string& image = binary->cubin.empty() ? binary->ptx : binary->cubin;
        scope.use(device);
        CUmodule module = nullptr;  // lives as long as the process: runners are cached
        d.check(d.cuModuleLoadData(&module, image.c_str()), "cuModuleLoadData");
        CUfunction f = nullptr;
        d.check(d.cuModuleGetFunction(&f, module, kChainKernel), "cuModuleGetFunction");
        int blocks = 0;
        d.check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, chain::kThreads, 0),
                "cuOccupancyMaxActiveBlocksPerMultiprocessor");
        if (static_cast<long long>(blocks) * d.multiprocessors(device) < l.ctas) {
          throw ValueError("dispatch: the chain's " + std::to_string(l.ctas) + " CTAs per rank must all be resident "
                           "at once, and GPU " + std::to_string(device) + " holds " +
                           std::to_string(blocks * d.multiprocessors(device)) + "; use dispatch='root_pull'");
        }
        functions_[device] = f;
      }
    }
    // In one process: every rank's chain memory on its GPU, and the links to its neighbours.
    // (Across processes the transport made and mapped them.)
    if (plan.call.treduce->transport.empty()) {
      for (int p = 0; p < ranks; ++p) {
        const int r = detail_.order[p], next = detail_.order[(p + 1) % ranks];
        d.enable_peer_access(devices_[r], devices_[next]);
        d.enable_peer_access(devices_[next], devices_[r]);
        memory_.push_back(std::make_shared<DeviceBuffer>(chain::kRankBytes, devices_[r]));
        memory_.back()->zero();
      }
    }
  }

  void run(const RunArgs& args) const override {
    std::lock_guard<std::mutex> lock(mutex_);  // one call at a time: its epoch and the staging
    const chain::Layout& l = detail_.layout;
    if (l.steps == 0) return;  // an empty tensor: dst untouched
    const bool one_process = args.signal_pads.empty();
    const int ranks = static_cast<int>(detail_.order.size());
    if (!one_process && (args.self_rank < 0 || args.self_rank >= ranks || args.signal_pads.size() != devices_.size())) {
      throw ValueError("self_rank: " + std::to_string(args.self_rank) + " is not one of the call's " +
                       std::to_string(ranks) + " ranks, each with its chain memory");
    }
    if (one_process && memory_.empty()) throw ValueError("treduce across processes needs every rank's chain memory");
    const unsigned long long epoch = one_process ? ++epoch_ : args.epoch;
    // rank r's chain memory (its signal pad's address: the chain's lies after it)
    const auto base = [&](int p) -> unsigned char* {
      const int r = detail_.order[(p + ranks) % ranks];
      return reinterpret_cast<unsigned char*>(one_process ? memory_[(p + ranks) % ranks]->pointer()
                                                          : args.signal_pads[r]);
    };
    const auto flags = [&](int p) { return reinterpret_cast<chain::Flags*>(base(p) + chain::kFlagsAt); };
    const auto staging = [&](int p) { return base(p) + chain::kStagingAt; };
    bool aligned = detail_.geometry.src[4] == 1 && detail_.geometry.dst[4] == 1 && args.output.data % 16 == 0;
    Driver& d = Driver::get();
    DeviceScope scope;
    for (int p = 0; p < ranks; ++p) {
      const int r = detail_.order[p];
      if (!one_process && r != args.self_rank) continue;
      const bool last = p == ranks - 1;
      chain::Launch a{};
      a.src = reinterpret_cast<const void*>(args.inputs[r].data);
      a.dst = reinterpret_cast<void*>(args.output.data);
      a.l = l;
      a.position = p;
      a.ranks = ranks;
      a.vectors = aligned && args.inputs[r].data % 16 == 0;
      a.in = p > 0 ? staging(p) : nullptr;
      a.out = last ? nullptr : staging(p + 1);
      a.own = flags(p);
      a.next = ranks > 1 ? flags(p + 1) : nullptr;  // the last position's: the root's
      a.prev = p > 0 ? flags(p - 1) : nullptr;
      a.epoch = epoch;
      a.timeout_ns = signals::timeout_ns(args.timeout_s);
      a.abandoned = reinterpret_cast<const unsigned long long*>(args.abandoned);
      void* params[] = {&a};
      scope.use(devices_[r]);
      d.check(d.cuLaunchKernel(functions_.at(devices_[r]), static_cast<unsigned>(l.ctas), 1, 1, chain::kThreads, 1, 1,
                               0, reinterpret_cast<CUstream>(args.streams[r]), params, nullptr),
              "cuLaunchKernel");
    }
  }

  std::vector<std::pair<std::string, std::string>> describe() const override {
    const chain::Layout& l = detail_.layout;
    return {{"threads_per_cta", std::to_string(chain::kThreads)},
            {"ctas_per_rank", std::to_string(l.ctas)},
            {"steps_per_cta", std::to_string(l.steps_of(0))},
            {"slots_in_flight", std::to_string(chain::kSlots)},
            {"ordering", "flags between neighbours in the chain, in each rank's GPU memory"}};
  }

 private:
  ChainPlan detail_;
  std::vector<int> devices_;
  std::map<int, CUfunction> functions_;  // by device
  std::vector<std::shared_ptr<DeviceBuffer>> memory_;  // one process: by position in the order
  mutable unsigned long long epoch_ = 0;
  mutable std::mutex mutex_;
};

class ChainExecutor : public CudaExecutor {
 public:
  BuiltKernel build(const Plan& plan, const std::string& arch) const override { return built(plan, arch); }
  std::shared_ptr<const Runner> bind(const Plan& plan) const override {
    require_device_ranks(plan);
    return std::make_shared<ChainRunner>(plan);
  }
};

}  // namespace

std::unique_ptr<Executor> chain_executor() { return std::make_unique<ChainExecutor>(); }

}  // namespace tp::cuda
