#include "backends/cpu/program_runner.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "backends/cpu/parallel.h"
#include "ops/dtype.h"

namespace tp {

namespace {

// Elements of all intermediates of one chunk: small enough that a chunk's tiles stay in the
// core's cache between steps, and that each step runs on one thread (the chunks are parallel).
constexpr long long kChunkElements = 1 << 14;

}  // namespace

void run_program_host(const ProgramPlan& plan, const std::vector<std::uintptr_t>& inputs,
                      const std::vector<double>& scalars, const std::vector<std::uintptr_t>& outputs, long long tiles,
                      const std::function<bool()>& interrupted) {
  if (tiles <= 0) return;
  const size_t n_values = plan.values.size();
  std::vector<long long> bytes(n_values);  // per tile
  long long widest = 1, per_tile = 0;
  for (size_t i = 0; i < n_values; ++i) {
    bytes[i] = plan.values[i].elements() * dtype_size(plan.values[i].dtype);
    widest = std::max(widest, plan.values[i].elements());
    per_tile += plan.values[i].elements();
  }
  // a result returned once is written straight into its output
  std::vector<int> direct(n_values, -1);
  for (size_t j = 0; j < plan.outputs.size(); ++j) {
    const int id = plan.outputs[j];
    if (plan.values[id].input < 0 && direct[id] < 0) direct[id] = static_cast<int>(j);
  }
  // Chunks keep a chunk's intermediates in cache; with none (every tile an input read in place or
  // an output written in place), each step runs over the whole batch, spread over the cores itself.
  bool buffered = false;
  for (size_t i = 0; i < n_values; ++i) {
    const ProgramValue& v = plan.values[i];
    buffered |= v.input >= 0 ? v.batch_broadcast : direct[i] < 0;
  }
  const long long chunk = buffered ? std::max(1ll, std::min(tiles, kChunkElements / widest)) : tiles;
  const long long chunks = (tiles + chunk - 1) / chunk;
  parallel_for(chunks, chunk * per_tile, interrupted, [&](long long begin, long long end, const auto& keep_going) {
    // this range's intermediates; a batch-broadcast input repeated once per tile of a chunk
    std::vector<std::vector<std::max_align_t>> buffers(n_values);
    auto reserve = [&](size_t i) {
      const long long words = (chunk * bytes[i] + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
      buffers[i].resize(static_cast<size_t>(words));
      return reinterpret_cast<unsigned char*>(buffers[i].data());
    };
    for (size_t i = 0; i < n_values; ++i) {
      const ProgramValue& v = plan.values[i];
      if (v.input >= 0 && v.batch_broadcast) {
        unsigned char* buf = reserve(i);
        for (long long t = 0; t < chunk; ++t) {
          std::memcpy(buf + t * bytes[i], reinterpret_cast<const void*>(inputs[v.input]),
                      static_cast<size_t>(bytes[i]));
        }
      } else if (v.input < 0 && direct[i] < 0) {
        reserve(i);
      }
    }
    for (long long c = begin; c < end && keep_going(); ++c) {
      const long long first = c * chunk, n = std::min(chunk, tiles - first);
      auto at = [&](int id) -> std::uintptr_t {
        const ProgramValue& v = plan.values[id];
        if (v.input >= 0 && !v.batch_broadcast) return inputs[v.input] + static_cast<std::uintptr_t>(first * bytes[id]);
        if (direct[id] >= 0) return outputs[direct[id]] + static_cast<std::uintptr_t>(first * bytes[id]);
        return reinterpret_cast<std::uintptr_t>(buffers[id].data());
      };
      for (const ProgramStep& step : plan.steps) {
        RunArgs args;
        for (size_t i = 0; i < step.operands.size(); ++i) {
          const int id = step.operands[i];
          args.inputs.push_back(TensorArg{id < 0 ? 0 : at(id), {}, -1});
          args.scalars.push_back(plan.scalar(step, i, scalars));
        }
        args.output = TensorArg{at(step.result), {}, -1};
        args.tiles = n;
        if (chunks == 1) args.interrupted = interrupted;  // the step spreads the batch over the cores
        step.bound->runner().run(args);
      }
      for (size_t j = 0; j < plan.outputs.size(); ++j) {
        const int id = plan.outputs[j];
        if (direct[id] == static_cast<int>(j)) continue;
        std::memcpy(reinterpret_cast<void*>(outputs[j] + static_cast<std::uintptr_t>(first * bytes[id])),
                    reinterpret_cast<const void*>(at(id)), static_cast<size_t>(n * bytes[id]));
      }
    }
  });
}

}  // namespace tp
