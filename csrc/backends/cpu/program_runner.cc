#include "backends/cpu/program_runner.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "backends/cpu/parallel.h"
#include "errors.h"
#include "ops/dtype.h"

namespace tp {

namespace {

// Elements of all intermediates of one chunk: small enough that a chunk's tiles stay in the
// core's cache between steps, and that each step runs on one thread (the chunks are parallel).
constexpr long long kChunkElements = 1 << 14;

}  // namespace

HostProgramRunner::HostProgramRunner(std::shared_ptr<const ProgramPlan> plan) : plan_(std::move(plan)) {
  const std::vector<ProgramValue>& values = plan_->values;
  for (const ProgramValue& v : values) {
    bytes_.push_back(v.elements() * dtype_size(v.dtype));
    widest_ = std::max(widest_, v.elements());
    per_tile_ += v.elements();
  }
  // a result returned once is written straight into its output
  direct_.assign(values.size(), -1);
  for (size_t j = 0; j < plan_->outputs.size(); ++j) {
    const int id = plan_->outputs[j];
    if (values[id].input < 0 && direct_[id] < 0) direct_[id] = static_cast<int>(j);
  }
  // Chunks keep a chunk's intermediates in cache; with none (every tile an input read in place or
  // an output written in place), each step runs over the whole batch, spread over the cores itself.
  for (size_t i = 0; i < values.size(); ++i) buffered_ |= values[i].input >= 0 ? values[i].batch_broadcast : direct_[i] < 0;
}

template <class At>
void HostProgramRunner::run_steps(const ProgramArgs& args, long long first, long long n, const At& at,
                                  bool whole_batch) const {
  const ProgramPlan& plan = *plan_;
  for (const ProgramStep& step : plan.steps) {
    RunArgs run;
    run.inputs.reserve(step.operands.size());
    run.scalars.reserve(step.operands.size());
    for (size_t i = 0; i < step.operands.size(); ++i) {
      const int id = step.operands[i];
      run.inputs.push_back(TensorArg{id < 0 ? 0 : at(id), {}, -1});
      run.scalars.push_back(plan.scalar(step, i, args.scalars));
    }
    run.output = TensorArg{at(step.result), {}, -1};
    run.tiles = n;
    if (whole_batch) run.interrupted = args.interrupted;  // the step spreads the batch over the cores
    step.bound->runner().run(run);
  }
  for (size_t j = 0; j < plan.outputs.size(); ++j) {
    const int id = plan.outputs[j];
    if (direct_[id] == static_cast<int>(j)) continue;
    std::memcpy(reinterpret_cast<void*>(args.outputs[j] + static_cast<std::uintptr_t>(first * bytes_[id])),
                reinterpret_cast<const void*>(at(id)), static_cast<size_t>(n * bytes_[id]));
  }
}

void HostProgramRunner::run(const ProgramArgs& args) const {
  if (args.device >= 0) throw ValueError("backend: 'cpu' runs on host arrays, not on CUDA device " + std::to_string(args.device));
  if (!plan_->folded.empty()) {
    throw ValueError(plan_->name + ": folded outputs are the CUDA kernel's; on the CPU the rows a call returns are summed "
                     "after (tileprim._torch.sum_to, the same order)");
  }
  if (args.scalars.size() != static_cast<size_t>(plan_->scalar_args)) {  // as the CUDA kernel checks
    throw ValueError(plan_->name + ": expected " + std::to_string(plan_->scalar_args) + " run-time scalars, got " +
                     std::to_string(args.scalars.size()));
  }
  const long long tiles = args.tiles;
  if (tiles <= 0) return;
  const ProgramPlan& plan = *plan_;
  if (!buffered_) {  // every value an input or an output, read and written in place
    run_steps(args, 0, tiles, [&](int id) {
      const ProgramValue& v = plan.values[id];
      return v.input >= 0 ? args.inputs[v.input] : args.outputs[direct_[id]];
    }, true);
    return;
  }
  const long long chunk = std::max(1ll, std::min(tiles, kChunkElements / widest_));
  const long long chunks = (tiles + chunk - 1) / chunk;
  parallel_for(chunks, chunk * per_tile_, args.interrupted, [&](long long begin, long long end, const auto& keep_going) {
    // this range's intermediates; a batch-broadcast input repeated once per tile of a chunk
    std::vector<std::vector<std::max_align_t>> buffers(plan.values.size());
    auto reserve = [&](size_t i) {
      const long long words = (chunk * bytes_[i] + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
      buffers[i].resize(static_cast<size_t>(words));
      return reinterpret_cast<unsigned char*>(buffers[i].data());
    };
    for (size_t i = 0; i < plan.values.size(); ++i) {
      const ProgramValue& v = plan.values[i];
      if (v.input >= 0 && v.batch_broadcast) {
        unsigned char* buf = reserve(i);
        for (long long t = 0; t < chunk; ++t) {
          std::memcpy(buf + t * bytes_[i], reinterpret_cast<const void*>(args.inputs[v.input]),
                      static_cast<size_t>(bytes_[i]));
        }
      } else if (v.input < 0 && direct_[i] < 0) {
        reserve(i);
      }
    }
    for (long long c = begin; c < end && keep_going(); ++c) {
      const long long first = c * chunk, n = std::min(chunk, tiles - first);
      run_steps(args, first, n, [&](int id) -> std::uintptr_t {
        const ProgramValue& v = plan.values[id];
        const std::uintptr_t offset = static_cast<std::uintptr_t>(first * bytes_[id]);
        if (v.input >= 0 && !v.batch_broadcast) return args.inputs[v.input] + offset;
        if (direct_[id] >= 0) return args.outputs[direct_[id]] + offset;
        return reinterpret_cast<std::uintptr_t>(buffers[id].data());
      }, chunks == 1);
    }
  });
}

void register_cpu_program_executor() {
  add_program_executor("cpu", [](const std::shared_ptr<const ProgramPlan>& plan) -> std::shared_ptr<const ProgramRunner> {
    return std::make_shared<HostProgramRunner>(plan);
  });
}

}  // namespace tp
