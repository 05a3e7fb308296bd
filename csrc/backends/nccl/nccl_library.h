// NCCL, opened with dlopen the first time a transport asks for it (never at import). Search order,
// first that loads wins: $TILEPRIM_NCCL (a full path); the NVIDIA NCCL wheel that PyTorch depends
// on, <site>/nvidia/nccl/lib, and PyTorch's own lib dir, for the site dirs given to load();
// $CUDA_HOME/{lib64,lib}; the loader path (libnccl.so.2).
#pragma once
#include <mutex>
#include <string>
#include <vector>

#include "backends/cuda/driver.h"  // LibraryStatus, CudaError
#include "backends/cuda/dynamic_library.h"
#include "backends/nccl/nccl_api.h"

namespace tp::nccl {

#define TP_NCCL_ENTRY_POINTS(X) \
  X(ncclGetErrorString)         \
  X(ncclGetLastError)           \
  X(ncclGetVersion)             \
  X(ncclGetUniqueId)            \
  X(ncclCommInitRankConfig)     \
  X(ncclCommDestroy)            \
  X(ncclCommAbort)              \
  X(ncclCommGetAsyncError)      \
  X(ncclGroupStart)             \
  X(ncclGroupEnd)               \
  X(ncclSend)                   \
  X(ncclRecv)

class Library {
 public:
  // The library, loading it on the first call (with these site dirs); retried with new site
  // dirs while it has not loaded. Never throws (see status()).
  static Library& load(const std::vector<std::string>& site_dirs);
  static Library& get();  // as loaded so far; status().ok says whether it is usable
  static Library& usable();  // get(), or CudaError saying why NCCL is unavailable

  const cuda::LibraryStatus& status() const { return status_; }
  int version() const { return version_; }  // e.g. 22809 for 2.28.9

  // Throws CudaError("what (NCCL x.y.z): reason; NCCL's last warning: ...") unless r is
  // ncclSuccess. The warning is NCCL's own account of the failure (ncclGetLastError, kept
  // whatever NCCL_DEBUG says), where it has one.
  void check(ncclResult_t r, const char* what) const;
  std::string error_text(ncclResult_t r) const;  // "invalid argument; NCCL's last warning: ..."


#define TP_DECLARE(name) PFN_##name name = nullptr;
  TP_NCCL_ENTRY_POINTS(TP_DECLARE)
#undef TP_DECLARE

 private:
  Library() = default;
  void load_locked(const std::vector<std::string>& site_dirs);
  bool try_open(const std::string& candidate, std::string& failures);

  std::mutex mutex_;
  bool attempted_ = false;
  cuda::LibraryStatus status_;
  cuda::DynamicLibrary library_;
  int version_ = 0;
};

}  // namespace tp::nccl
