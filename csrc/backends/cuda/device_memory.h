// Device memory owned by tileprim: buffers Python holds (results for JAX and interface-only
// libraries), and a per-device staging arena through which NumPy operands travel to the GPU
// and back without an allocation per call.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>

#include "backends/cuda/cuda_api.h"

namespace tp::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer(size_t bytes, int device);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr pointer() const { return pointer_; }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }
  void zero();  // every byte 0, before the call returns

 private:
  CUdeviceptr pointer_ = 0;
  size_t bytes_;
  int device_;
};

// Pinned host memory that this process's kernels read and write at the same address (mapped,
// unified addressing), zeroed: for flags the host raises with a plain store, no driver call
// (a driver lock held by another thread's synchronous copy cannot hold it up), and GPUs poll.
class MappedHostBuffer {
 public:
  MappedHostBuffer(size_t bytes, int device);  // allocated in `device`'s context, mapped in every one
  ~MappedHostBuffer();
  MappedHostBuffer(const MappedHostBuffer&) = delete;
  MappedHostBuffer& operator=(const MappedHostBuffer&) = delete;

  std::uintptr_t pointer() const { return reinterpret_cast<std::uintptr_t>(host_); }

 private:
  void* host_ = nullptr;
};

// Pinned host memory and device memory of the same size, and a stream, per device; grown,
// never shrunk. One call at a time uses a device's arena.
class StagingArena {
 public:
  static StagingArena& of(int device);
  // Runs use(host, device, stream) with at least `bytes` in both buffers, holding the arena.
  void with(size_t bytes, const std::function<void(unsigned char*, CUdeviceptr, CUstream)>& use);

 private:
  explicit StagingArena(int device) : device_(device) {}
  int device_;
  std::mutex mutex_;
  size_t bytes_ = 0;
  unsigned char* host_ = nullptr;
  CUdeviceptr buffer_ = 0;
  CUstream stream_ = nullptr;
};

void synchronize(CUstream stream, int device);

}  // namespace tp::cuda
