#include "backends/cuda/dynamic_library.h"

#include <dlfcn.h>
#include <sys/stat.h>

namespace tp::cuda {

bool DynamicLibrary::open(const std::string& candidate, std::string& failures) {
  const bool is_path = candidate.find('/') != std::string::npos;
  struct stat info {};
  if (is_path && !(stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode))) {
    failures += "  " + candidate + ": no such file\n";  // skip dlopen's slower search
    return false;
  }
  handle_ = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* why = dlerror();
    failures += "  " + candidate + ": " + (why ? why : "dlopen failed") + "\n";
    return false;
  }
  candidate_ = candidate;
  return true;
}

void DynamicLibrary::close() {
  if (handle_) dlclose(handle_);
  handle_ = nullptr;
}

void* DynamicLibrary::find(const char* name) const { return handle_ ? dlsym(handle_, name) : nullptr; }

std::string DynamicLibrary::path_of(void* symbol) const {
  Dl_info info{};
  if (symbol && dladdr(symbol, &info) && info.dli_fname) return info.dli_fname;
  return candidate_;
}

}  // namespace tp::cuda
