#include "backends/cuda/tile_executor.h"

#include <cstdio>
#include <cstring>

#include "backends/cuda/compiler.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/program_frame.h"
#include "errors.h"

namespace tp::cuda {

namespace {

constexpr size_t kArenaAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }

class CudaTileRunner : public Runner {
 public:
  CudaTileRunner(const Plan& plan, BuiltKernel kernel, int device)
      : kernel_(std::move(kernel)), device_(device), accum_(plan.call.accum) {
    if (plan.call.inputs.size() > kMaxOperands) throw ValueError(plan.call.op() + ": too many operands for one kernel");
    for (const TileRef& r : plan.call.inputs) {
      scalar_.push_back(r.scalar);
      input_bytes_.push_back(0);
    }
    for (const OperandStaging& s : plan.staging) {  // operands only read for their shape move nothing
      if (s.operand >= 0 && s.kind != Staging::scalar) input_bytes_[s.operand] = s.elements * dtype_size(s.dtype);
    }
    output_bytes_ = static_cast<size_t>(plan.call.output.elements() * dtype_size(plan.call.output.dtype));
    context_ = Driver::get().context(device_);
    DeviceScope scope;
    scope.use(context_);
    function_ = load_kernel(*kernel_.binary, kernel_.source.shared_bytes);
  }

  void run(const RunArgs& args) const override {
    if (args.tiles == 0) return;
    const bool host = args.output.device < 0;
    if (!host) {
      std::vector<CUdeviceptr> inputs;
      for (const TensorArg& t : args.inputs) inputs.push_back(t.data);
      DeviceScope scope;
      scope.use(context_);
      launch(inputs, args.scalars, args.output.data, args.tiles,
             args.streams.empty() ? nullptr : reinterpret_cast<CUstream>(args.streams[0]));
      return;
    }
    // NumPy operands: one copy in of every input (and the old output), the kernel, one copy out.
    std::vector<size_t> offsets;
    size_t total = 0;
    for (size_t i = 0; i < args.inputs.size(); ++i) {
      offsets.push_back(total);
      total += aligned(input_bytes_[i] * args.tiles);
    }
    const size_t out_offset = total, out_bytes = output_bytes_ * args.tiles;
    total += aligned(out_bytes);
    StagingArena::of(device_).with(total, [&](unsigned char* pinned, CUdeviceptr buffer, CUstream stream) {
      Driver& d = Driver::get();
      std::vector<CUdeviceptr> inputs;
      for (size_t i = 0; i < args.inputs.size(); ++i) {
        if (input_bytes_[i]) {
          std::memcpy(pinned + offsets[i], reinterpret_cast<const void*>(args.inputs[i].data),
                      input_bytes_[i] * args.tiles);
        }
        inputs.push_back(buffer + offsets[i]);
      }
      const size_t in_bytes = accum_ ? out_offset + out_bytes : out_offset;
      if (accum_) std::memcpy(pinned + out_offset, reinterpret_cast<const void*>(args.output.data), out_bytes);
      d.check(d.cuMemcpyHtoDAsync(buffer, pinned, in_bytes, stream), "cuMemcpyHtoDAsync");
      launch(inputs, args.scalars, buffer + out_offset, args.tiles, stream);
      d.check(d.cuMemcpyDtoHAsync(pinned + out_offset, buffer + out_offset, out_bytes, stream), "cuMemcpyDtoHAsync");
      d.check(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
      std::memcpy(reinterpret_cast<void*>(args.output.data), pinned + out_offset, out_bytes);
    });
  }

  std::vector<std::pair<std::string, std::string>> describe() const override {
    // Resident blocks per SM bound the bytes in flight: a block issues the loads of its whole
    // run of tiles before it computes.
    int blocks_per_sm = 0;
    DeviceScope scope;
    scope.use(device_);
    Driver::get().check(Driver::get().cuOccupancyMaxActiveBlocksPerMultiprocessor(
                            &blocks_per_sm, function_, kernel_.source.block_threads(),
                            static_cast<size_t>(kernel_.source.shared_bytes)),
                        "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    size_t tile_bytes = 0;
    for (size_t b : input_bytes_) tile_bytes += b;
    return {{"arch", kernel_.arch},
            {"block_threads", std::to_string(kernel_.source.block_threads())},
            {"instances_per_block", std::to_string(kernel_.source.instances)},
            {"tiles_per_block", std::to_string(kernel_.source.tiles_per_block())},
            {"tiles_per_block_why", kernel_.source.why},
            {"shared_bytes", std::to_string(kernel_.source.shared_bytes)},
            {"blocks_per_sm", std::to_string(blocks_per_sm)},
            {"bytes_in_flight_per_sm", std::to_string(blocks_per_sm * kernel_.source.tiles_per_block() * tile_bytes)},
            {"kernel", kernel_.binary->origin}};
  }

 private:
  void launch(std::vector<CUdeviceptr>& inputs, const std::vector<double>& scalars, CUdeviceptr output,
              long long tiles, CUstream stream) const {
    double values[kMaxOperands] = {};
    void* params[kMaxOperands + 2];
    const size_t n = inputs.size();
    for (size_t i = 0; i < n; ++i) {
      values[i] = i < scalars.size() ? scalars[i] : 0.0;
      params[i] = scalar_[i] ? static_cast<void*>(&values[i]) : &inputs[i];
    }
    params[n] = &output;
    params[n + 1] = &tiles;
    const int per_block = kernel_.source.tiles_per_block();
    const long long blocks = (tiles + per_block - 1) / per_block;
    if (blocks > 0x7fffffffLL) throw ValueError("batch: " + std::to_string(tiles) + " tiles need more blocks than a grid has");
    launch_kernel(function_, blocks, kernel_.source.block_threads(), kernel_.source.shared_bytes, stream, params,
                  device_);
  }

  static constexpr size_t kMaxOperands = 8;  // the op table's largest arity is 3
  BuiltKernel kernel_;
  int device_;
  bool accum_;
  std::vector<bool> scalar_;
  std::vector<size_t> input_bytes_;  // per tile
  size_t output_bytes_ = 0;          // per tile
  CUcontext context_ = nullptr;  // device_'s primary context, looked up once
  CUfunction function_ = nullptr;
};

int device_of(const Plan& plan) { return plan.context.devices.empty() ? 0 : plan.context.devices[0]; }

}  // namespace

CUfunction load_kernel(const CompiledKernel& binary, long long shared_bytes) {
  Driver& d = Driver::get();
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  const std::string& image = binary.cubin.empty() ? binary.ptx : binary.cubin;
  d.check(d.cuModuleLoadData(&module, image.c_str()), "cuModuleLoadData");
  d.check(d.cuModuleGetFunction(&function, module, kKernelName), "cuModuleGetFunction");
  if (shared_bytes > 48 * 1024) {  // past the default, a kernel opts in
    d.check(d.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 static_cast<int>(shared_bytes)),
            "cuFuncSetAttribute(max dynamic shared memory)");
  }
  return function;
}

void launch_kernel(CUfunction function, long long blocks, long long block_threads, long long shared_bytes,
                   CUstream stream, void** params, int device) {
  Driver& d = Driver::get();
  const CUresult r = d.cuLaunchKernel(function, static_cast<unsigned>(blocks), 1, 1, static_cast<unsigned>(block_threads),
                                      1, 1, static_cast<unsigned>(shared_bytes), stream, params, nullptr);
  int local = 0;
  if (r == CUDA_ERROR_OUT_OF_MEMORY &&
      d.cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, function) == CUDA_SUCCESS && local > 0) {
    const double gib = static_cast<double>(local) * d.multiprocessors(device) * d.threads_per_multiprocessor(device) /
                       (1 << 30);
    char reserve[32];
    std::snprintf(reserve, sizeof(reserve), "%.1f GiB", gib);
    throw CudaError("cuLaunchKernel: CUDA_ERROR_OUT_OF_MEMORY: the kernel keeps " + std::to_string(local) +
                    " bytes per thread in local memory (registers spilled: its tiles hold more elements per thread "
                    "than registers do), which CUDA reserves for every thread the GPU holds at once (" + reserve +
                    " here), more than is free; a wider scope (tp.warp, tp.cta(n)) gives each thread fewer elements");
  }
  d.check(r, "cuLaunchKernel");
}

BuiltKernel build_kernel(const Plan& plan, const std::string& arch) {
  const auto* executor = dynamic_cast<const CudaExecutor*>(ExecutorTable::instance().find(plan.variant, "cuda"));
  if (!executor) throw ValueError("backend: no cuda kernel for variant " + plan.variant);
  return executor->build(plan, arch);
}

KernelBody kernel_body(const Plan& plan) {
  const auto* executor = dynamic_cast<const CudaTileExecutor*>(ExecutorTable::instance().find(plan.variant, "cuda"));
  if (!executor) throw ValueError("backend: no cuda kernel body for variant " + plan.variant);
  return executor->body(plan);
}

KernelSource kernel_launch(const Plan& plan, const std::string& arch) {
  return frame_launch(call_frame(plan, kernel_body(plan)), arch);
}

BuiltKernel CudaTileExecutor::build(const Plan& plan, const std::string& arch) const {
  return build_frame(call_frame(plan, make_(plan)), arch);
}

std::shared_ptr<const Runner> CudaTileExecutor::bind(const Plan& plan) const {
  const int device = device_of(plan);
  return std::make_shared<CudaTileRunner>(plan, build(plan, compile_arch(plan.context.device_target())), device);
}

}  // namespace tp::cuda
