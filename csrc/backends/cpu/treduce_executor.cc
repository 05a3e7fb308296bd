// The CPU executor of both treduce variants: the chunk pipeline of the seed over host arrays.
// Each worker's pieces go through an accumulator tile and a receive tile (or ping and pong
// tiles, alternating), rank after rank in fold order, with the device template's fold steps;
// so the CPU result is the reference the GPU must equal bit for bit.
#include "backends/cpu/treduce_executor.h"

#include <chrono>
#include <type_traits>
#include <vector>

#include "ops/host_types.h"
#include "ops/reduce_functors.h"
#include "tileprim/comm/treduce.cuh"
#include "variants/comm/treduce_common.h"

namespace tp {

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(20);

template <class Op, class Acc, class T>
void run_pieces(const TreducePlan& detail, const RunArgs& args) {
  using Fold = treduce::Step<Op, Acc>;
  const treduce::Geometry& g = detail.geometry;
  std::vector<const T*> src;
  for (int r : detail.order) src.push_back(reinterpret_cast<const T*>(args.inputs[r].data));
  T* dst = reinterpret_cast<T*>(args.output.data);
  const size_t tile = static_cast<size_t>(g.rows_per_piece * g.tile_cols);
  std::vector<Acc> acc(tile);
  std::vector<T> ping(tile), pong(tile);
  auto next_poll = std::chrono::steady_clock::now() + kPollInterval;
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
      if (args.interrupted && std::chrono::steady_clock::now() >= next_poll) {
        if (args.interrupted()) throw Interrupted();
        next_poll = std::chrono::steady_clock::now() + kPollInterval;
      }
    }
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
  explicit HostTreduceRunner(const Plan& plan) : detail_(plan.detail_as<TreducePlan>()) {
    with_element(detail_.dtype, [&](auto t) {
      using T = typename decltype(t)::type;
      with_accumulator<T>(detail_, [&](auto a) {
        using Acc = typename decltype(a)::type;
        with_reduce_functor(detail_.functor, [&](auto op) { run_pieces_ = &run_pieces<decltype(op), Acc, T>; });
      });
    });
  }
  void run(const RunArgs& args) const override { run_pieces_(detail_, args); }

 private:
  TreducePlan detail_;
  void (*run_pieces_)(const TreducePlan&, const RunArgs&) = nullptr;
};

class HostTreduceExecutor : public Executor {
 public:
  std::shared_ptr<const Runner> bind(const Plan& plan) const override {
    return std::make_shared<HostTreduceRunner>(plan);
  }
};

}  // namespace

void register_cpu_treduce(ExecutorTable& table) {
  table.add("root_pull", "cpu", std::make_unique<HostTreduceExecutor>());
  table.add("scatter_gather", "cpu", std::make_unique<HostTreduceExecutor>());
}

}  // namespace tp
