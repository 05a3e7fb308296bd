#include "backends/cuda/driver.h"

#include <string>

namespace tp::cuda {

namespace {
// The versioned name: the unversioned libcuda.so is a developer symlink that the toolkit's
// stub library can satisfy, and the stub fails every call.
constexpr const char* kDriverLibrary = "libcuda.so.1";
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
  std::string failures;
  if (!library_.open(kDriverLibrary, failures)) {
    status_.error = std::string("CUDA driver library ") + kDriverLibrary + " not found on the loader path (" +
                    failures.substr(failures.find(": ") + 2, failures.size() - failures.find(": ") - 3) +
                    "); is the NVIDIA driver installed?";
    return;
  }
  std::string missing;
#define TP_RESOLVE(member, symbol) library_.resolve(member, symbol, missing);
  TP_DRIVER_ENTRY_POINTS(TP_RESOLVE)
#undef TP_RESOLVE
  status_.path = library_.path_of(library_.find("cuInit"));
  if (!missing.empty()) {
    status_.error = "CUDA driver " + status_.path + " lacks " + missing + "; the driver is too old for tileprim";
    return;
  }
  const CUresult init = cuInit(0);
  if (init != CUDA_SUCCESS) {
    const char* name = nullptr;
    const char* description = nullptr;
    cuGetErrorName(init, &name);
    cuGetErrorString(init, &description);
    status_.error = "CUDA driver " + status_.path + ": cuInit failed: " + (name ? name : "unknown error") + ": " +
                    (description ? description : "no description");
    return;
  }
  int count = 0;
  if (cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    status_.error = "CUDA driver " + status_.path + ": no CUDA device";
    return;
  }
  primary_contexts_.assign(count, nullptr);
  peers_enabled_.assign(count, std::vector<bool>(count, false));
  status_.ok = true;
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
  if (device < 0 || device >= count) {
    throw CudaError("device " + std::to_string(device) + " does not exist; this machine has " +
                    std::to_string(count) + " CUDA device(s)");
  }
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
bool Driver::stream_waits(int device) {
  int value = 0;
  return cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, device_handle(device)) ==
             CUDA_SUCCESS &&
         value != 0;
}
int Driver::threads_per_multiprocessor(int device) {
  return attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, device);
}

int Driver::driver_version() {
  require_loaded();
  int version = 0;
  check(cuDriverGetVersion(&version), "cuDriverGetVersion");
  return version;
}

bool Driver::can_access_peer(int device, int peer) {
  if (device == peer) return true;
  const CUdevice a = device_handle(device), b = device_handle(peer);
  int can = 0;
  check(cuDeviceCanAccessPeer(&can, a, b), "cuDeviceCanAccessPeer");
  return can != 0;
}

CUcontext Driver::context(int device) {
  const CUdevice handle = device_handle(device);
  // Retain once: every retain needs a matching release, and the primary context should
  // live as long as the process.
  std::lock_guard<std::mutex> lock(mutex_);
  if (!primary_contexts_[device]) {
    check(cuDevicePrimaryCtxRetain(&primary_contexts_[device], handle), "cuDevicePrimaryCtxRetain");
  }
  return primary_contexts_[device];
}

void Driver::make_current(int device) { check(cuCtxSetCurrent(context(device)), "cuCtxSetCurrent"); }

void Driver::enable_peer_access(int device, int peer) {
  if (device == peer) return;
  const CUcontext peer_context = context(peer);
  DeviceScope scope;
  scope.use(device);
  std::lock_guard<std::mutex> lock(mutex_);
  if (peers_enabled_[device][peer]) return;
  const CUresult r = cuCtxEnablePeerAccess(peer_context, 0);
  if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) check(r, "cuCtxEnablePeerAccess");
  peers_enabled_[device][peer] = true;
}

DeviceScope::DeviceScope() {
  Driver::get().cuCtxGetCurrent(&saved_);
  active_ = saved_;
}

DeviceScope::~DeviceScope() {
  if (active_ != saved_) Driver::get().cuCtxSetCurrent(saved_);
}

void DeviceScope::use(int device) { use(Driver::get().context(device)); }

void DeviceScope::use(CUcontext wanted) {
  if (wanted == active_) return;
  Driver& d = Driver::get();
  d.check(d.cuCtxSetCurrent(wanted), "cuCtxSetCurrent");
  active_ = wanted;
}

}  // namespace tp::cuda
