// From CUDA source to a binary: NVRTC behind the kernel cache, with the options every
// tileprim kernel is built with and the architecture chosen for a device.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/kernel_cache.h"

namespace tp::cuda {

// Set once by the Python package: its version, where its device headers are installed and
// the site-packages dirs to look for NVIDIA's wheels in.
void configure(const std::string& package_version, const std::string& include_dir,
               const std::vector<std::string>& site_dirs);
std::string header_digest();  // sha256 over the installed device headers

// What NVRTC builds for a target (dispatch/architecture.h): the target itself (SASS) when the
// loaded NVRTC knows its number, else PTX (compute_XX) for the newest arch NVRTC knows at or
// below it, which the driver compiles on load.
std::string compile_arch(const std::string& target);

// tileprim's NVRTC options for `arch` (without --gpu-architecture); the toolkit's include
// dir is added when the source needs cuda_fp16.h / cuda_bf16.h.
std::vector<std::string> kernel_options(const std::string& source);

// The binary for (source, arch, options) from the kernel cache, compiling on a miss:
// SASS (and PTX) for sm_XX, PTX only for compute_XX. The key also holds the package version
// and header digest (by default, those configure() set).
std::shared_ptr<const CompiledKernel> compile_cached(const std::string& source, const std::string& arch,
                                                     const std::vector<std::string>& options);
std::shared_ptr<const CompiledKernel> compile_cached(const std::string& source, const std::string& arch,
                                                     const std::vector<std::string>& options,
                                                     const std::string& package_version,
                                                     const std::string& header_digest);

}  // namespace tp::cuda
