#include "backends/nccl/nccl_library.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace tp::nccl {

namespace {

const char* const kName = "libnccl.so.2";

// The places to try, in order, without repeats.
std::vector<std::string> candidates(const std::vector<std::string>& site_dirs) {
  std::vector<std::string> paths;
  auto add = [&](const std::string& path) {
    if (std::find(paths.begin(), paths.end(), path) == paths.end()) paths.push_back(path);
  };
  for (const auto& site : site_dirs) {
    add(site + "/nvidia/nccl/lib/" + kName);
    add(site + "/torch/lib/" + kName);
  }
  for (const char* root : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* base = std::getenv(root);
    if (!base || !*base) continue;
    add(std::string(base) + "/lib64/" + kName);
    add(std::string(base) + "/lib/" + kName);
  }
  add(kName);
  return paths;
}

}  // namespace

Library& Library::get() {
  static Library library;
  return library;
}

Library& Library::usable() {
  Library& library = get();
  if (!library.status().ok) throw cuda::CudaError("NCCL is unavailable: " + library.status().error);
  return library;
}

Library& Library::load(const std::vector<std::string>& site_dirs) {
  Library& library = get();
  std::lock_guard<std::mutex> lock(library.mutex_);
  if (!library.attempted_ || !library.status_.ok) {
    try {
      library.load_locked(site_dirs);
    } catch (const std::exception& e) {
      library.status_.ok = false;
      library.status_.error = std::string("NCCL: ") + e.what();
    }
  }
  return library;
}

void Library::load_locked(const std::vector<std::string>& site_dirs) {
  attempted_ = true;
  status_ = cuda::LibraryStatus{};
  std::string failures;
  const char* override_path = std::getenv("TILEPRIM_NCCL");
  if (override_path && *override_path) {
    // An explicit choice that fails is the answer: loading another NCCL instead would hide it.
    if (try_open(override_path, failures)) return;
    status_.error = "TILEPRIM_NCCL could not be loaded:\n" + failures;
    return;
  }
  for (const auto& candidate : candidates(site_dirs))
    if (try_open(candidate, failures)) return;
  status_.error = std::string(kName) + " could not be loaded. Install NCCL (pip install nvidia-nccl-cu13, or "
                  "the one PyTorch brings), set CUDA_HOME, or set TILEPRIM_NCCL to the library. Tried:\n" + failures;
}

bool Library::try_open(const std::string& candidate, std::string& failures) {
  status_.tried.push_back(candidate);
  if (!library_.open(candidate, failures)) return false;
  std::string missing;
#define TP_RESOLVE(name) library_.resolve(name, #name, missing);
  TP_NCCL_ENTRY_POINTS(TP_RESOLVE)
#undef TP_RESOLVE
  if (!missing.empty() || ncclGetVersion(&version_) != ncclSuccess) {
    failures += "  " + candidate + ": " + (missing.empty() ? "ncclGetVersion failed" : "lacks " + missing) + "\n";
    library_.close();
    return false;
  }
  if (version_ < 21800) {  // ncclSend/ncclRecv in groups across many peers, and ncclCommAbort, as used here
    failures += "  " + candidate + ": NCCL " + std::to_string(version_) + " is older than 2.18\n";
    library_.close();
    return false;
  }
  status_.ok = true;
  status_.path = library_.path_of(reinterpret_cast<void*>(ncclGetVersion));
  return true;
}

std::string Library::error_text(ncclResult_t r) const {
  std::string text = ncclGetErrorString(r);
  const char* warning = ncclGetLastError(nullptr);
  if (warning && *warning) {
    std::string last = warning;
    while (!last.empty() && (last.back() == '\n' || last.back() == ' ')) last.pop_back();
    text += "; NCCL's last warning: " + last;
  }
  return text;
}

void Library::check(ncclResult_t r, const char* what) const {
  if (r == ncclSuccess) return;
  char version[32];
  std::snprintf(version, sizeof(version), "%d.%d.%d", version_ / 10000, version_ / 100 % 100, version_ % 100);
  throw cuda::CudaError(std::string(what) + " (NCCL " + version + "): " + error_text(r));
}

}  // namespace tp::nccl
