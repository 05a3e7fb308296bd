// NVRTC, opened with dlopen on first use. Search order, first that loads wins:
//   $TILEPRIM_NVRTC (a full path); $CUDA_HOME/{lib64,lib}, $CUDA_PATH/{lib64,lib};
//   the NVIDIA pip wheels <site>/nvidia/{cuda_nvrtc,cu13}/lib for the site dirs given to init();
//   the loader path. In each directory libnvrtc.so.13 is tried before libnvrtc.so.12.
//
//   Nvrtc::init(site_dirs);   // once, before first use, to include the wheels
//   auto out = Nvrtc::get().compile(source, "k.cu", {"--gpu-architecture=sm_90a"}, true);
#pragma once
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/driver.h"  // LibraryStatus, CudaError
#include "backends/cuda/dynamic_library.h"

namespace tp::cuda {

#define TP_NVRTC_ENTRY_POINTS(X)                         \
  X(nvrtcGetErrorString)                                 \
  X(nvrtcVersion)                                        \
  X(nvrtcGetNumSupportedArchs)                           \
  X(nvrtcGetSupportedArchs)                              \
  X(nvrtcCreateProgram)                                  \
  X(nvrtcDestroyProgram)                                 \
  X(nvrtcCompileProgram)                                 \
  X(nvrtcGetPTXSize)                                     \
  X(nvrtcGetPTX)                                         \
  X(nvrtcGetCUBINSize)                                   \
  X(nvrtcGetCUBIN)                                       \
  X(nvrtcGetProgramLogSize)                              \
  X(nvrtcGetProgramLog)

// NVRTC rejected a program; the message is its log followed by the numbered source.
struct CompileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Nvrtc {
 public:
  struct CompileResult {
    std::string ptx;
    std::string cubin;  // empty unless asked for (and the target is sm_XX, not compute_XX)
    std::string log;
    double milliseconds = 0;
  };

  // Loads on the first call without the wheel dirs; never throws (see status()).
  static Nvrtc& get();
  // Loads with the wheel dirs of these site-packages dirs too. Retries if an earlier
  // attempt failed; once NVRTC is loaded, only toolkit_include_dir() uses the dirs.
  static Nvrtc& init(const std::vector<std::string>& extra_dirs);

  const LibraryStatus& status() const { return status_; }
  std::string library_path() const { return status_.path; }

  // These throw CudaError when NVRTC is unavailable.
  std::pair<int, int> version() const;  // e.g. {13, 0}
  std::vector<int> supported_archs() const;  // e.g. {75, 80, ..., 120}
  CompileResult compile(const std::string& source, const std::string& name, const std::vector<std::string>& options,
                        bool want_cubin) const;

  // The directory holding cuda_fp16.h, for -I; empty when none of the candidates has it.
  std::string toolkit_include_dir() const;

  Nvrtc(const Nvrtc&) = delete;
  Nvrtc& operator=(const Nvrtc&) = delete;

 private:
  Nvrtc() = default;
  void load_locked(const std::vector<std::string>& extra_dirs);
  bool try_open(const std::string& candidate, std::string& failures);
  void require_loaded() const;
  void check(nvrtcResult r, const char* what) const;

  mutable std::mutex mutex_;  // guards loading and extra_dirs_
  bool attempted_ = false;
  LibraryStatus status_;
  std::vector<std::string> extra_dirs_;
  DynamicLibrary library_;
  std::pair<int, int> version_{0, 0};

#define TP_DECLARE(name) PFN_##name name = nullptr;
  TP_NVRTC_ENTRY_POINTS(TP_DECLARE)
#undef TP_DECLARE
};

}  // namespace tp::cuda
