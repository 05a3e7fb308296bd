#include "backends/cuda/device_memory.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "backends/cuda/driver.h"

namespace tp::cuda {

DeviceBuffer::DeviceBuffer(size_t bytes, int device) : bytes_(bytes), device_(device) {
  Driver& d = Driver::get();
  DeviceScope scope;
  scope.use(device);
  d.check(d.cuMemAlloc(&pointer_, std::max<size_t>(bytes, 1)), "cuMemAlloc");
}

DeviceBuffer::~DeviceBuffer() {
  Driver& d = Driver::get();
  DeviceScope scope;
  scope.use(device_);
  d.cuMemFree(pointer_);
}

void DeviceBuffer::zero() {
  Driver& d = Driver::get();
  DeviceScope scope;
  scope.use(device_);
  d.check(d.cuMemsetD8Async(pointer_, 0, bytes_, nullptr), "cuMemsetD8Async");
  d.check(d.cuStreamSynchronize(nullptr), "cuStreamSynchronize");
}

MappedHostBuffer::MappedHostBuffer(size_t bytes, int device) {
  Driver& d = Driver::get();
  DeviceScope scope;
  scope.use(device);
  d.check(d.cuMemHostAlloc(&host_, std::max<size_t>(bytes, 1), CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
          "cuMemHostAlloc");
  std::memset(host_, 0, bytes);
}

MappedHostBuffer::~MappedHostBuffer() { Driver::get().cuMemFreeHost(host_); }

StagingArena& StagingArena::of(int device) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<StagingArena>> arenas;  // live as long as the process
  std::lock_guard<std::mutex> lock(mutex);
  auto& arena = arenas[device];
  if (!arena) arena.reset(new StagingArena(device));
  return *arena;
}

void StagingArena::with(size_t bytes, const std::function<void(unsigned char*, CUdeviceptr, CUstream)>& use) {
  std::lock_guard<std::mutex> lock(mutex_);
  Driver& d = Driver::get();
  DeviceScope scope;
  scope.use(device_);
  if (!stream_) d.check(d.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  if (bytes > bytes_) {
    const size_t grown = std::max(bytes, 2 * bytes_);
    if (host_) d.cuMemFreeHost(host_);
    if (buffer_) d.cuMemFree(buffer_);
    host_ = nullptr;
    buffer_ = 0;
    bytes_ = 0;
    void* host = nullptr;
    d.check(d.cuMemHostAlloc(&host, grown, 0), "cuMemHostAlloc");
    host_ = static_cast<unsigned char*>(host);
    d.check(d.cuMemAlloc(&buffer_, grown), "cuMemAlloc");
    bytes_ = grown;
  }
  use(host_, buffer_, stream_);
}

void synchronize(CUstream stream, int device) {
  Driver& d = Driver::get();
  DeviceScope scope;
  scope.use(device);
  d.check(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
}

}  // namespace tp::cuda
