// The CUDA driver, opened with dlopen("libcuda.so.1") the first time it is asked for, so that
// importing tileprim never needs a GPU or a driver. Other code calls the driver through the
// public function pointers: `auto& d = Driver::get(); d.check(d.cuMemAlloc(&p, n), "cuMemAlloc");`
#pragma once
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/dynamic_library.h"

namespace tp::cuda {

// A driver call failed, or the driver is not there; the message names the call and the reason.
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// How loading a run-time library went. `tried` lists every candidate in the order tried.
struct LibraryStatus {
  bool ok = false;
  std::string path;   // the library that loaded
  std::string error;  // when !ok: which library, where it looked, why it failed
  std::vector<std::string> tried;
};

// Every entry point: (member, the symbol cuda.h maps it to). Calls whose signature never
// changed may fall back to the plain name; the versioned ones may not (other ABI).
#define TP_DRIVER_ENTRY_POINTS(X)                            \
  X(cuInit, "cuInit")                                        \
  X(cuDriverGetVersion, "cuDriverGetVersion")                \
  X(cuDeviceGetCount, "cuDeviceGetCount")                    \
  X(cuDeviceGet, "cuDeviceGet")                              \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute")            \
  X(cuDeviceGetName, "cuDeviceGetName")                      \
  X(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer")          \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")    \
  X(cuCtxGetCurrent, "cuCtxGetCurrent")                      \
  X(cuCtxSetCurrent, "cuCtxSetCurrent")                      \
  X(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess")          \
  X(cuModuleLoadData, "cuModuleLoadData")                    \
  X(cuModuleGetFunction, "cuModuleGetFunction")              \
  X(cuFuncSetAttribute, "cuFuncSetAttribute")                \
  X(cuFuncGetAttribute, "cuFuncGetAttribute")                \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor") \
  X(cuLaunchKernel, "cuLaunchKernel")                        \
  X(cuMemAlloc, "cuMemAlloc_v2")                             \
  X(cuMemFree, "cuMemFree_v2")                               \
  X(cuMemHostAlloc, "cuMemHostAlloc")                        \
  X(cuMemFreeHost, "cuMemFreeHost")                          \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")               \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")               \
  X(cuMemcpyPeerAsync, "cuMemcpyPeerAsync")                  \
  X(cuMemsetD8Async, "cuMemsetD8Async")                      \
  X(cuStreamCreate, "cuStreamCreate")                        \
  X(cuStreamSynchronize, "cuStreamSynchronize")              \
  X(cuStreamQuery, "cuStreamQuery")                          \
  X(cuStreamDestroy, "cuStreamDestroy_v2")                   \
  X(cuStreamWaitEvent, "cuStreamWaitEvent")                  \
  X(cuStreamWriteValue64, "cuStreamWriteValue64_v2")         \
  X(cuStreamWaitValue64, "cuStreamWaitValue64_v2")           \
  X(cuEventCreate, "cuEventCreate")                          \
  X(cuEventRecord, "cuEventRecord")                          \
  X(cuEventSynchronize, "cuEventSynchronize")                \
  X(cuEventQuery, "cuEventQuery")                            \
  X(cuEventDestroy, "cuEventDestroy_v2")                     \
  X(cuPointerGetAttribute, "cuPointerGetAttribute")          \
  X(cuMemGetAddressRange, "cuMemGetAddressRange_v2")         \
  X(cuIpcGetMemHandle, "cuIpcGetMemHandle")                  \
  X(cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2")             \
  X(cuIpcCloseMemHandle, "cuIpcCloseMemHandle")              \
  X(cuGetErrorName, "cuGetErrorName")                        \
  X(cuGetErrorString, "cuGetErrorString")

class Driver {
 public:
  // Loads the driver and runs cuInit on the first call; never throws (see status()).
  static Driver& get();

  const LibraryStatus& status() const { return status_; }

  // These throw CudaError when the driver is unavailable or the device ordinal is bad.
  int device_count();
  std::string device_name(int device);
  int compute_capability(int device);  // major * 10 + minor, e.g. 90
  int multiprocessors(int device);
  int threads_per_multiprocessor(int device);  // the most resident at once
  int driver_version();  // e.g. 13000
  bool can_access_peer(int device, int peer);
  bool stream_waits(int device);  // cuStreamWaitValue64 works on `device` (false where unknown)

  // Retains the device's primary context (once per process) and makes it current on the
  // calling thread.
  void make_current(int device);
  // Lets kernels on `device` read and write `peer`'s memory (once per pair per process).
  void enable_peer_access(int device, int peer);
  // The device's primary context (retained once per process).
  CUcontext context(int device);

  // Throws CudaError("what: CUDA_ERROR_NAME: description") unless r is CUDA_SUCCESS.
  void check(CUresult r, const char* what) const;

#define TP_DECLARE(member, symbol) PFN_##member member = nullptr;
  TP_DRIVER_ENTRY_POINTS(TP_DECLARE)
#undef TP_DECLARE

  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

 private:
  Driver();
  void load();
  void require_loaded() const;
  CUdevice device_handle(int device);
  int attribute(CUdevice_attribute attribute, int device);

  LibraryStatus status_;
  DynamicLibrary library_;
  std::mutex mutex_;
  std::vector<CUcontext> primary_contexts_;  // by ordinal; null until retained
  std::vector<std::vector<bool>> peers_enabled_;
};

// Makes devices current for a while and then gives the calling thread its own context back, so
// that the caller's framework (PyTorch's current device) sees no change.
class DeviceScope {
 public:
  DeviceScope();
  ~DeviceScope();
  void use(int device);  // makes `device` current, unless it already is
  void use(CUcontext context);  // the same with the device's context in hand (no lookup)
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  CUcontext saved_ = nullptr;   // the caller's
  CUcontext active_ = nullptr;  // current now
};

}  // namespace tp::cuda
