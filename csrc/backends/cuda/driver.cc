#include "backends/cuda/driver.h"

#include <dlfcn.h>

#include <string>
#include <type_traits>

namespace tp::cuda {

namespace {

// The versioned name: the unversioned libcuda.so is a developer symlink that the toolkit's
// stub library can satisfy, and the stub fails every call.
constexpr const char* kDriverLibrary = "libcuda.so.1";

std::string loaded_path(void* symbol, const char* fallback) {
  Dl_info info{};
  if (symbol && dladdr(symbol, &info) && info.dli_fname) return info.dli_fname;
  return fallback;
}

}  // namespace

Driver& Driver::get() {
  static Driver driver;  // thread-safe one-time construction
  return driver;
}

Driver::Driver() {
  try {
    load();
  } catch (const std::exception& e) {  // keeps get() from throwing, e.g. on bad_alloc
    status_.ok = false;
    status_.error = std::string("CUDA driver: ") + e.what();
  }
}

void Driver::load() {
  status_.tried.push_back(kDriverLibrary);
  handle_ = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* why = dlerror();
    status_.error = std::string("CUDA driver library ") + kDriverLibrary +
                    " not found on the loader path (" + (why ? why : "dlopen failed") +
                    "); is the NVIDIA driver installed?";
    return;
  }
  if (!resolve_symbols()) return;
  status_.path = loaded_path(reinterpret_cast<void*>(cuInit), kDriverLibrary);

  const CUresult init = cuInit(0);
  if (init != CUDA_SUCCESS) {
    const char* name = nullptr;
    const char* description = nullptr;
    cuGetErrorName(init, &name);
    cuGetErrorString(init, &description);
    status_.error = "CUDA driver " + status_.path + ": cuInit failed: " + (name ? name : "unknown error") +
                    ": " + (description ? description : "no description");
    return;
  }
  int count = 0;
  if (cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    status_.error = "CUDA driver " + status_.path + ": no CUDA device";
    return;
  }
  primary_contexts_.assign(count, nullptr);
  status_.ok = true;
}

bool Driver::resolve_symbols() {
  // cuda.h maps several calls to a versioned symbol; ask for that one. The plain name is an
  // older ABI (32-bit pointers for cuMemAlloc), so only calls whose signature did not change
  // may fall back to it (cuEventElapsedTime_v2 is new in 12.8).
  std::string missing;
  auto resolve = [&](auto& slot, const char* name, const char* same_signature_fallback = nullptr) {
    void* symbol = dlsym(handle_, name);
    if (!symbol && same_signature_fallback) symbol = dlsym(handle_, same_signature_fallback);
    if (!symbol) missing += std::string(missing.empty() ? "" : ", ") + name;
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(symbol);
  };
  resolve(cuInit, "cuInit");
  resolve(cuDriverGetVersion, "cuDriverGetVersion");
  resolve(cuDeviceGetCount, "cuDeviceGetCount");
  resolve(cuDeviceGet, "cuDeviceGet");
  resolve(cuDeviceGetAttribute, "cuDeviceGetAttribute");
  resolve(cuDeviceGetName, "cuDeviceGetName");
  resolve(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  resolve(cuCtxGetCurrent, "cuCtxGetCurrent");
  resolve(cuCtxSetCurrent, "cuCtxSetCurrent");
  resolve(cuCtxSynchronize, "cuCtxSynchronize");
  resolve(cuModuleLoadData, "cuModuleLoadData");
  resolve(cuModuleUnload, "cuModuleUnload");
  resolve(cuModuleGetFunction, "cuModuleGetFunction");
  resolve(cuFuncSetAttribute, "cuFuncSetAttribute");
  resolve(cuLaunchKernel, "cuLaunchKernel");
  resolve(cuMemAlloc, "cuMemAlloc_v2");
  resolve(cuMemFree, "cuMemFree_v2");
  resolve(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  resolve(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  resolve(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  resolve(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  resolve(cuMemsetD8, "cuMemsetD8_v2");
  resolve(cuStreamSynchronize, "cuStreamSynchronize");
  resolve(cuPointerGetAttribute, "cuPointerGetAttribute");
  resolve(cuEventCreate, "cuEventCreate");
  resolve(cuEventRecord, "cuEventRecord");
  resolve(cuEventSynchronize, "cuEventSynchronize");
  resolve(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime");
  resolve(cuEventDestroy, "cuEventDestroy_v2");
  resolve(cuGetErrorName, "cuGetErrorName");
  resolve(cuGetErrorString, "cuGetErrorString");
  if (missing.empty()) return true;
  status_.error = "CUDA driver " + loaded_path(dlsym(handle_, "cuInit"), kDriverLibrary) +
                  " lacks " + missing + "; the driver is too old for tileprim";
  return false;
}

void Driver::check(CUresult r, const char* what) const {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* description = nullptr;
  if (cuGetErrorName) cuGetErrorName(r, &name);
  if (cuGetErrorString) cuGetErrorString(r, &description);
  throw CudaError(std::string(what) + ": " + (name ? name : "CUDA error " + std::to_string(r)) + ": " +
                  (description ? description : "no description"));
}

void Driver::require_loaded() const {
  if (!status_.ok) throw CudaError("CUDA is unavailable: " + status_.error);
}

CUdevice Driver::device_handle(int device) {
  require_loaded();
  const int count = static_cast<int>(primary_contexts_.size());
  if (device < 0 || device >= count)
    throw CudaError("device " + std::to_string(device) + " does not exist; this machine has " +
                    std::to_string(count) + " CUDA device(s)");
  CUdevice handle = 0;
  check(cuDeviceGet(&handle, device), "cuDeviceGet");
  return handle;
}

int Driver::attribute(CUdevice_attribute attribute, int device) {
  const CUdevice handle = device_handle(device);
  int value = 0;
  check(cuDeviceGetAttribute(&value, attribute, handle), "cuDeviceGetAttribute");
  return value;
}

int Driver::device_count() {
  require_loaded();
  return static_cast<int>(primary_contexts_.size());
}

std::string Driver::device_name(int device) {
  const CUdevice handle = device_handle(device);
  char name[256] = {};
  check(cuDeviceGetName(name, sizeof(name) - 1, handle), "cuDeviceGetName");
  return name;
}

int Driver::compute_capability(int device) {
  return attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) * 10 +
         attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
}

int Driver::multiprocessors(int device) { return attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device); }

int Driver::driver_version() {
  require_loaded();
  int version = 0;
  check(cuDriverGetVersion(&version), "cuDriverGetVersion");
  return version;
}

void Driver::make_current(int device) {
  const CUdevice handle = device_handle(device);
  CUcontext context = nullptr;
  {
    // Retain once: every retain needs a matching release, and the primary context should
    // live as long as the process.
    std::lock_guard<std::mutex> lock(contexts_mutex_);
    if (!primary_contexts_[device])
      check(cuDevicePrimaryCtxRetain(&primary_contexts_[device], handle), "cuDevicePrimaryCtxRetain");
    context = primary_contexts_[device];
  }
  check(cuCtxSetCurrent(context), "cuCtxSetCurrent");
}

}  // namespace tp::cuda
