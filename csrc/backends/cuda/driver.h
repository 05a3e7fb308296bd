// The CUDA driver, opened with dlopen("libcuda.so.1") the first time it is asked for, so that
// importing tileprim never needs a GPU or a driver. Other code calls the driver through the
// public function pointers: `auto& d = Driver::get(); d.check(d.cuMemAlloc(&p, n), "cuMemAlloc");`
#pragma once
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cuda/cuda_api.h"

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
  int driver_version();  // e.g. 13000

  // Retains the device's primary context (once per process) and makes it current on the
  // calling thread.
  void make_current(int device);

  // Throws CudaError("what: CUDA_ERROR_NAME: description") unless r is CUDA_SUCCESS.
  void check(CUresult r, const char* what) const;

  PFN_cuInit cuInit = nullptr;
  PFN_cuDriverGetVersion cuDriverGetVersion = nullptr;
  PFN_cuDeviceGetCount cuDeviceGetCount = nullptr;
  PFN_cuDeviceGet cuDeviceGet = nullptr;
  PFN_cuDeviceGetAttribute cuDeviceGetAttribute = nullptr;
  PFN_cuDeviceGetName cuDeviceGetName = nullptr;
  PFN_cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRetain = nullptr;
  PFN_cuCtxGetCurrent cuCtxGetCurrent = nullptr;
  PFN_cuCtxSetCurrent cuCtxSetCurrent = nullptr;
  PFN_cuCtxSynchronize cuCtxSynchronize = nullptr;
  PFN_cuModuleLoadData cuModuleLoadData = nullptr;
  PFN_cuModuleUnload cuModuleUnload = nullptr;
  PFN_cuModuleGetFunction cuModuleGetFunction = nullptr;
  PFN_cuFuncSetAttribute cuFuncSetAttribute = nullptr;
  PFN_cuLaunchKernel cuLaunchKernel = nullptr;
  PFN_cuMemAlloc cuMemAlloc = nullptr;
  PFN_cuMemFree cuMemFree = nullptr;
  PFN_cuMemcpyHtoD cuMemcpyHtoD = nullptr;
  PFN_cuMemcpyDtoH cuMemcpyDtoH = nullptr;
  PFN_cuMemcpyHtoDAsync cuMemcpyHtoDAsync = nullptr;
  PFN_cuMemcpyDtoHAsync cuMemcpyDtoHAsync = nullptr;
  PFN_cuMemsetD8 cuMemsetD8 = nullptr;
  PFN_cuStreamSynchronize cuStreamSynchronize = nullptr;
  PFN_cuPointerGetAttribute cuPointerGetAttribute = nullptr;
  PFN_cuEventCreate cuEventCreate = nullptr;
  PFN_cuEventRecord cuEventRecord = nullptr;
  PFN_cuEventSynchronize cuEventSynchronize = nullptr;
  PFN_cuEventElapsedTime cuEventElapsedTime = nullptr;
  PFN_cuEventDestroy cuEventDestroy = nullptr;
  PFN_cuGetErrorName cuGetErrorName = nullptr;
  PFN_cuGetErrorString cuGetErrorString = nullptr;

  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

 private:
  Driver();
  void load();
  bool resolve_symbols();
  void require_loaded() const;
  CUdevice device_handle(int device);
  int attribute(CUdevice_attribute attribute, int device);

  LibraryStatus status_;
  void* handle_ = nullptr;
  std::mutex contexts_mutex_;
  std::vector<CUcontext> primary_contexts_;  // by ordinal; null until retained
};

}  // namespace tp::cuda
