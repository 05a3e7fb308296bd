#include "backends/cuda/program_executor.h"

#include <algorithm>
#include <cstring>

#include "backends/cuda/compiler.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/tile_executor.h"
#include "errors.h"
#include "ops/dtype.h"

namespace tp::cuda {

namespace {
constexpr size_t kArenaAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }
}  // namespace

BuiltKernel build_program(const ProgramPlan& plan, const std::string& arch) {
  return build_frame([&](int max_instances) { return program_frame(plan, arch, max_instances); }, arch);
}

ProgramKernel::ProgramKernel(std::shared_ptr<const ProgramPlan> plan)
    : plan_(std::move(plan)), device_(plan_->context.devices.empty() ? 0 : plan_->context.devices[0]) {
  if (plan_->context.backend != "cuda") throw ValueError("backend: this program was planned for the " + plan_->context.backend);
  built_ = build_program(*plan_, compile_arch(plan_->context.device_target()));
  std::vector<const ProgramValue*> inputs;
  for (const ProgramValue& v : plan_->values) {
    if (v.input < 0) continue;
    if (static_cast<size_t>(v.input) >= input_bytes_.size()) {
      input_bytes_.resize(v.input + 1);
      input_shared_.resize(v.input + 1);
    }
    input_bytes_[v.input] = static_cast<size_t>(v.elements() * dtype_size(v.dtype));
    input_shared_[v.input] = v.batch_broadcast;
  }
  for (int id : plan_->outputs) {
    const ProgramValue& v = plan_->values.at(id);
    output_bytes_.push_back(static_cast<size_t>(v.elements() * dtype_size(v.dtype)));
    output_read_.push_back(v.accumulated);
  }
  context_ = Driver::get().context(device_);
  DeviceScope scope;
  scope.use(context_);
  function_ = load_kernel(*built_.binary, built_.source.shared_bytes, built_.source.ctas);
}

void ProgramKernel::run(const ProgramArgs& args) const {
  if (args.inputs.size() != input_bytes_.size() || args.outputs.size() != output_bytes_.size() ||
      args.scalars.size() != static_cast<size_t>(plan_->scalar_args)) {
    throw ValueError(plan_->name + ": expected " + std::to_string(input_bytes_.size()) + " inputs, " +
                     std::to_string(plan_->scalar_args) + " scalars and " + std::to_string(output_bytes_.size()) +
                     " outputs");
  }
  if (args.tiles <= 0) return;
  if (args.device < 0) return run_host(args);
  if (args.device != device_) {
    throw ValueError("device: the arrays are on CUDA device " + std::to_string(args.device) + ", the kernel was built "
                     "for device " + std::to_string(device_));
  }
  const std::vector<CUdeviceptr> inputs(args.inputs.begin(), args.inputs.end());
  const std::vector<CUdeviceptr> outputs(args.outputs.begin(), args.outputs.end());
  launch(inputs, args.scalars, outputs, args.tiles, reinterpret_cast<CUstream>(args.stream));
}

void ProgramKernel::launch(const std::vector<CUdeviceptr>& inputs, const std::vector<double>& scalars,
                           const std::vector<CUdeviceptr>& outputs, long long tiles, CUstream stream) const {
  const KernelSource& l = built_.source;
  const long long blocks = l.blocks(tiles);
  if (blocks > 0x7fffffffLL) throw ValueError("batch: " + std::to_string(tiles) + " tiles need more blocks than a grid has");
  // the kernel's parameters in order: input pointers, scalars, output pointers, tiles
  std::vector<CUdeviceptr> pointers(inputs);
  pointers.insert(pointers.end(), outputs.begin(), outputs.end());
  std::vector<double> values(scalars);
  std::vector<void*> params;
  params.reserve(pointers.size() + values.size() + 1);
  for (size_t i = 0; i < inputs.size(); ++i) params.push_back(&pointers[i]);
  for (double& v : values) params.push_back(&v);
  for (size_t j = inputs.size(); j < pointers.size(); ++j) params.push_back(&pointers[j]);
  params.push_back(&tiles);
  DeviceScope scope;
  scope.use(context_);
  launch_kernel(function_, blocks, l.block_threads(), l.shared_bytes, stream, params.data(), device_);
}

void ProgramKernel::run_host(const ProgramArgs& args) const {
  const long long tiles = args.tiles;
  std::vector<size_t> in_at, in_size, out_at, out_size;
  size_t total = 0;
  for (size_t i = 0; i < input_bytes_.size(); ++i) {
    in_at.push_back(total);
    in_size.push_back(input_bytes_[i] * (input_shared_[i] ? 1 : static_cast<size_t>(tiles)));
    total += aligned(in_size.back());
  }
  size_t in_total = total;  // what goes in: the inputs, then outputs read first (accum)
  for (size_t j = 0; j < output_bytes_.size(); ++j) {
    out_at.push_back(total);
    out_size.push_back(output_bytes_[j] * static_cast<size_t>(tiles));
    total += aligned(out_size.back());
  }
  for (size_t j = 0; j < output_read_.size(); ++j) {
    if (output_read_[j]) in_total = std::max(in_total, out_at[j] + out_size[j]);
  }
  StagingArena::of(device_).with(total, [&](unsigned char* pinned, CUdeviceptr buffer, CUstream stream) {
    Driver& d = Driver::get();
    std::vector<CUdeviceptr> in, out;
    for (size_t i = 0; i < in_at.size(); ++i) {
      std::memcpy(pinned + in_at[i], reinterpret_cast<const void*>(args.inputs[i]), in_size[i]);
      in.push_back(buffer + in_at[i]);
    }
    for (size_t j = 0; j < out_at.size(); ++j) {
      out.push_back(buffer + out_at[j]);
      if (output_read_[j]) std::memcpy(pinned + out_at[j], reinterpret_cast<const void*>(args.outputs[j]), out_size[j]);
    }
    d.check(d.cuMemcpyHtoDAsync(buffer, pinned, in_total, stream), "cuMemcpyHtoDAsync");
    launch(in, args.scalars, out, tiles, stream);
    const size_t out_first = out_at.empty() ? total : out_at.front();
    d.check(d.cuMemcpyDtoHAsync(pinned + out_first, buffer + out_first, total - out_first, stream), "cuMemcpyDtoHAsync");
    d.check(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
    for (size_t j = 0; j < out_at.size(); ++j) {
      std::memcpy(reinterpret_cast<void*>(args.outputs[j]), pinned + out_at[j], out_size[j]);
    }
  });
}

std::vector<std::pair<std::string, std::string>> ProgramKernel::describe() const {
  // Resident blocks per SM bound the bytes in flight: a block issues the loads of its whole run of
  // tiles before it computes.
  int blocks_per_sm = 0;
  DeviceScope scope;
  scope.use(context_);
  Driver::get().check(Driver::get().cuOccupancyMaxActiveBlocksPerMultiprocessor(
                          &blocks_per_sm, function_, built_.source.block_threads(),
                          static_cast<size_t>(built_.source.shared_bytes)),
                      "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  size_t tile_bytes = 0;
  for (size_t b : input_bytes_) tile_bytes += b;
  return {{"arch", built_.arch},
          {"block_threads", std::to_string(built_.source.block_threads())},
          {"instances_per_block", std::to_string(built_.source.instances)},
          {"tiles_per_block", std::to_string(built_.source.tiles_per_block())},
          {"tiles_per_block_why", built_.source.why},
          {"shared_bytes", std::to_string(built_.source.shared_bytes)},
          {"blocks_per_sm", std::to_string(blocks_per_sm)},
          {"bytes_in_flight_per_sm", std::to_string(blocks_per_sm * built_.source.tiles_per_block() * tile_bytes)},
          {"kernel", built_.binary->origin}};
}

void register_cuda_program_executor() {
  // the planner declines a staging whose kernel this frame could not lay out (row_staging.h)
  set_frame_shared_bytes([](const ProgramPlan& plan) { return program_launch(plan, plan.context.target).shared_bytes; });
  add_program_executor("cuda", [](const std::shared_ptr<const ProgramPlan>& plan) -> std::shared_ptr<const ProgramRunner> {
    return std::make_shared<ProgramKernel>(plan);
  });
}

}  // namespace tp::cuda
