#include "backends/cuda/ipc.h"

#include <cstddef>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "backends/cuda/compiler.h"
#include "backends/cuda/driver.h"
#include "dispatch/architecture.h"
#include "errors.h"
#include "tileprim/comm/chain.cuh"
#include "tileprim/comm/signals.cuh"
#include "tileprim/config.cuh"

namespace tp::cuda {

namespace {

const char* kArriveSource =
    "// tileprim: a rank's part of a treduce whose kernels run in another process\n"
    "#include <tileprim/comm/arrive_kernel.cuh>\n";

CUfunction arrive_function(int device) {
  static std::mutex mutex;
  static std::map<int, CUfunction> loaded;  // modules live as long as the process
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = loaded.find(device); it != loaded.end()) return it->second;
  Driver& d = Driver::get();
  auto binary = compile_cached(kArriveSource, compile_arch(sm_target(d.compute_capability(device))),
                               kernel_options(kArriveSource));
  DeviceScope scope;
  scope.use(device);
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  const std::string& image = binary->cubin.empty() ? binary->ptx : binary->cubin;
  d.check(d.cuModuleLoadData(&module, image.c_str()), "cuModuleLoadData");
  d.check(d.cuModuleGetFunction(&function, module, "tp_arrive"), "cuModuleGetFunction");
  return loaded[device] = function;
}

}  // namespace

std::pair<std::string, std::uint64_t> ipc_export(std::uint64_t pointer, int device) {
  Driver& d = Driver::get();
  DeviceScope scope;
  scope.use(device);
  // An allocation's handle, by its process-wide unique buffer id (an address may be reused by a
  // later allocation; an id is not): the export is a driver round trip, a repeated call a lookup.
  static std::mutex mutex;
  static std::map<unsigned long long, std::pair<std::string, CUdeviceptr>> exported;
  unsigned long long id = 0;
  d.check(d.cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, pointer), "cuPointerGetAttribute");
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = exported.find(id); it != exported.end()) return {it->second.first, pointer - it->second.second};
  CUdeviceptr base = 0;
  size_t bytes = 0;
  d.check(d.cuMemGetAddressRange(&base, &bytes, pointer), "cuMemGetAddressRange");
  CUipcMemHandle handle;
  const CUresult r = d.cuIpcGetMemHandle(&handle, base);
  if (r != CUDA_SUCCESS) {
    try {
      d.check(r, "cuIpcGetMemHandle");
    } catch (const CudaError& e) {
      throw ValueError(std::string("x: its memory cannot be shared with other processes through CUDA IPC (") +
                       e.what() + "); allocate it with cudaMalloc (PyTorch: no expandable_segments)");
    }
  }
  auto& entry = exported[id] = {std::string(handle.reserved, sizeof(handle.reserved)), base};
  return {entry.first, pointer - base};
}

std::uint64_t ipc_open(const std::string& handle, int device) {
  if (handle.size() != sizeof(CUipcMemHandle)) throw ValueError("handle: not a CUDA IPC handle (64 bytes)");
  Driver& d = Driver::get();
  DeviceScope scope;
  scope.use(device);
  CUipcMemHandle h;
  std::memcpy(h.reserved, handle.data(), sizeof(h.reserved));
  CUdeviceptr base = 0;
  d.check(d.cuIpcOpenMemHandle(&base, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle");
  return base;
}

void ipc_close(std::uint64_t base, int device) {
  Driver& d = Driver::get();
  DeviceScope scope;
  scope.use(device);
  d.check(d.cuIpcCloseMemHandle(base), "cuIpcCloseMemHandle");
}

void arrive(const std::vector<std::uint64_t>& pads, std::uintptr_t abandoned, unsigned long long epoch, int self,
            unsigned workers, double timeout, int device, std::uintptr_t stream) {
  if (self < 0 || self >= static_cast<int>(pads.size()) || pads.size() > static_cast<size_t>(kMaxGroupSize)) {
    throw ValueError("arrive: rank " + std::to_string(self) + " of " + std::to_string(pads.size()) + " pads");
  }
  Driver& d = Driver::get();
  unsigned long long timeout_ns = signals::timeout_ns(timeout);
  CUfunction f = arrive_function(device);
  DeviceScope scope;
  scope.use(device);
  signals::PadSet set{};
  for (size_t r = 0; r < pads.size(); ++r) set.pad[r] = reinterpret_cast<signals::Pad*>(pads[r]);
  std::uint64_t own = pads[self];
  void* params[] = {&set, &own, &abandoned, &epoch, &self, &workers, &timeout_ns};
  d.check(d.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(stream), params, nullptr),
          "cuLaunchKernel");
}

namespace {

// Writes `values` at `at` (device memory, this process's or mapped) from a stream of this
// process's own for `device`, which nothing else holds up, and waits for it.
void write_on_own_stream(CUdeviceptr at, const std::vector<unsigned long long>& values, int device) {
  static std::mutex mutex;
  static std::map<int, CUstream> streams;  // one per device, for as long as the process lives
  Driver& d = Driver::get();
  DeviceScope scope;
  scope.use(device);
  std::lock_guard<std::mutex> lock(mutex);
  CUstream& stream = streams[device];
  if (!stream) d.check(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  for (size_t i = 0; i < values.size(); ++i) {
    d.check(d.cuStreamWriteValue64(stream, at + i * sizeof(unsigned long long), values[i],
                                   CU_STREAM_WRITE_VALUE_DEFAULT),
            "cuStreamWriteValue64");
  }
  d.check(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
}

}  // namespace

void raise_flag(std::uint64_t pad, unsigned long long epoch, int rank, bool done, int device) {
  const CUdeviceptr flag = pad + (done ? offsetof(signals::Pad, done) : offsetof(signals::Pad, ready)) +
                           rank * sizeof(unsigned long long);
  write_on_own_stream(flag, {epoch}, device);
}

void raise_chain_flags(std::uint64_t pad, unsigned long long epoch, int device) {
  namespace chain = treduce::chain;
  // past every step of the call: the last one a step can have (its index below 2^32 - 1)
  const std::vector<unsigned long long> past(sizeof(chain::Flags) / sizeof(unsigned long long),
                                             chain::tag(epoch, 0xFFFFFFFEll));
  write_on_own_stream(pad + chain::kFlagsAt, past, device);
}

}  // namespace tp::cuda
