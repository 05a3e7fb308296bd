// From a Plan to a kernel running on a GPU: generate the source, compile it through the
// kernel cache for an architecture, load it once per device, launch it on a stream.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/codegen.h"
#include "backends/cuda/cuda_api.h"
#include "backends/cuda/kernel_cache.h"
#include "dispatch/plan.h"

namespace tp::cuda {

// Set once by the Python package: its version, where its device headers are installed and
// the site-packages dirs to look for NVIDIA's wheels in.
void configure(const std::string& package_version, const std::string& include_dir,
               const std::vector<std::string>& site_dirs);
std::string header_digest();  // sha256 over the installed device headers

// The compile target for a device of compute capability `cc`: sm_XX (sm_90a / sm_100a where
// the arch-specific features exist) when the loaded NVRTC knows it, else PTX (compute_XX) for
// the newest arch NVRTC knows, which the driver compiles on load.
std::string arch_for_compute_capability(int cc);

struct BuiltKernel {
  std::string source;
  std::string arch;
  std::vector<std::string> options;
  std::shared_ptr<const CompiledKernel> binary;
  int block_threads = 0;
  int instances = 1;
  long long shared_bytes = 0;  // per block
};

// Generates and compiles (or finds in the cache) the plan's kernel for `arch`.
BuiltKernel build(const Plan& plan, const std::string& arch);

struct LaunchArgs {
  CUdeviceptr inputs[3] = {0, 0, 0};  // 0 for scalar or absent operands
  double scalars[3] = {0, 0, 0};
  CUdeviceptr output = 0;
  long long tiles = 0;
  int device = 0;
  CUstream stream = nullptr;
};

// Builds for the device's arch (memoised per call shape and device), loads, launches.
void launch(const Plan& plan, const LaunchArgs& args);

// Device memory owned by Python (NumPy operands on the CUDA backend).
class DeviceBuffer {
 public:
  DeviceBuffer(size_t bytes, int device);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr pointer() const { return pointer_; }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }
  void copy_from_host(const void* src, size_t bytes, CUstream stream);
  void copy_to_host(void* dst, size_t bytes, CUstream stream) const;
  void fill_bytes(unsigned char value, CUstream stream);  // 0xff: NaN in every float type

 private:
  CUdeviceptr pointer_ = 0;
  size_t bytes_;
  int device_;
};

void synchronize(CUstream stream, int device);

}  // namespace tp::cuda
