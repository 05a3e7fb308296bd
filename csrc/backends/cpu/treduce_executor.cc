// The CPU executor of the treduce variants over host arrays. root_pull and scatter_gather: the
// chunk pipeline of the seed: each worker's pieces go through an accumulator tile and a receive
// tile (or ping and pong tiles, alternating), rank after rank in fold order, with the device
// template's fold steps. chain: the chain's steps, each through its slot rank after rank in fold
// order, with the kernel's step (chain.cuh's host_step). So the CPU result is the reference the
// GPU must equal bit for bit.
#include "backends/cpu/treduce_executor.h"

#include <chrono>
#include <memory>
#include <utility>
#include <type_traits>
#include <vector>

#include "ops/host_types.h"
#include "ops/reduce_functors.h"
#include "tileprim/comm/chain.cuh"
#include "tileprim/comm/treduce.cuh"
#include "variants/comm/treduce_common.h"

namespace tp {

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(20);

// Stops the run with Interrupted when the caller asks (looked at every kPollInterval).
class Poll {
 public:
  explicit Poll(const RunArgs& args) : args_(args), next_(std::chrono::steady_clock::now() + kPollInterval) {}
  void operator()() {
    if (!args_.interrupted || std::chrono::steady_clock::now() < next_) return;
    if (args_.interrupted()) throw Interrupted();
    next_ = std::chrono::steady_clock::now() + kPollInterval;
  }

 private:
  const RunArgs& args_;
  std::chrono::steady_clock::time_point next_;
};

template <class Op, class Acc, class T>
void run_pieces(const Plan& plan, const RunArgs& args) {
  using Fold = treduce::Step<Op, Acc>;
  const TreducePlan& detail = plan.detail_as<TreducePlan>();
  const treduce::Geometry& g = detail.geometry;
  std::vector<const T*> src;
  for (int r : detail.order) src.push_back(reinterpret_cast<const T*>(args.inputs[r].data));
  T* dst = reinterpret_cast<T*>(args.output.data);
  const size_t tile = static_cast<size_t>(g.rows_per_piece * g.tile_cols);
  std::vector<Acc> acc(tile);
  std::vector<T> ping(tile), pong(tile);
  Poll poll(args);
  for (const auto& [begin, end] : detail.shards) {
    for (long long piece = begin; piece < end; ++piece) {
      const treduce::Piece place = treduce::locate(g, piece);
      auto load = [&](const T* from, T* into) {
        for (long long r = 0; r < place.rows; ++r) {
          for (long long c = 0; c < place.cols; ++c) {
            into[r * place.cols + c] = from[place.src + r * g.src[3] + c * g.src[4]];
          }
        }
      };
      const long long n = place.rows * place.cols;
      load(src[0], ping.data());
      for (long long i = 0; i < n; ++i) acc[i] = Fold::first(ping[i]);
      for (size_t k = 1; k < src.size(); ++k) {
        T* recv = detail.pingpong && k % 2 == 0 ? pong.data() : ping.data();
        load(src[k], recv);
        for (long long i = 0; i < n; ++i) acc[i] = Fold::next(acc[i], recv[i]);
      }
      for (long long r = 0; r < place.rows; ++r) {
        for (long long c = 0; c < place.cols; ++c) {
          dst[place.dst + r * g.dst[3] + c * g.dst[4]] = Fold::template last<T>(acc[r * place.cols + c]);
        }
      }
      poll();
    }
  }
}

// Every step through one slot, position after position of the order.
template <class Op, class Acc, class T>
void run_chain(const Plan& plan, const RunArgs& args) {
  const ChainPlan& detail = plan.detail_as<ChainPlan>();
  const treduce::chain::Layout& l = detail.layout;
  const int ranks = static_cast<int>(detail.order.size());
  std::vector<Acc> slot(static_cast<size_t>(l.pieces_per_step * l.slot_cols));
  T* dst = reinterpret_cast<T*>(args.output.data);
  Poll poll(args);
  for (long long step = 0; step < l.steps; ++step) {
    for (int p = 0; p < ranks; ++p) {
      const T* src = reinterpret_cast<const T*>(args.inputs[detail.order[p]].data);
      treduce::chain::host_step<Op, Acc, T>(l, step, p, ranks, src, slot.data(), dst);
    }
    poll();
  }
}

template <class T, class F> void with_accumulator(const TreducePlan& detail, F&& f) {
  if constexpr (std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>) {
    if (detail.accumulate == DType::float32) return f(type_tag<float>{});
  }
  f(type_tag<T>{});
}

template <class F> void with_element(DType t, F&& f) {
  if (t == DType::int32) return f(type_tag<int>{});
  with_host_float(t, f);
}

class HostTreduceRunner : public Runner {
 public:
  explicit HostTreduceRunner(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {
    const TreducePlan& detail = plan_->detail_as<TreducePlan>();
    const bool chain = plan_->variant == "chain";
    with_element(detail.dtype, [&](auto t) {
      using T = typename decltype(t)::type;
      with_accumulator<T>(detail, [&](auto a) {
        using Acc = typename decltype(a)::type;
        with_reduce_functor(detail.functor, [&](auto op) {
          using Op = decltype(op);
          run_ = chain ? &run_chain<Op, Acc, T> : &run_pieces<Op, Acc, T>;
        });
      });
    });
  }
  void run(const RunArgs& args) const override { run_(*plan_, args); }

 private:
  std::shared_ptr<const Plan> plan_;
  void (*run_)(const Plan&, const RunArgs&) = nullptr;
};

class HostTreduceExecutor : public Executor {
 public:
  std::shared_ptr<const Runner> bind(const Plan& plan) const override {
    return std::make_shared<HostTreduceRunner>(std::make_shared<const Plan>(plan));
  }
};

}  // namespace

void register_cpu_treduce(ExecutorTable& table) {
  table.add("root_pull", "cpu", std::make_unique<HostTreduceExecutor>());
  table.add("scatter_gather", "cpu", std::make_unique<HostTreduceExecutor>());
  table.add("chain", "cpu", std::make_unique<HostTreduceExecutor>());
}

}  // namespace tp
