#include "backends/cuda/nvrtc.h"

#include <dlfcn.h>
#include <glob.h>

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace tp::cuda {

namespace {

// Newest first: a CUDA 13 NVRTC knows sm_100a and later; 12 is the fallback.
const char* const kLibraryNames[] = {"libnvrtc.so.13", "libnvrtc.so.12"};

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

bool is_file(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

// The directories to look in, in search order, without repeats.
std::vector<std::string> search_dirs(const std::vector<std::string>& site_dirs) {
  std::vector<std::string> dirs;
  auto add = [&](const std::string& dir) {
    for (const auto& d : dirs)
      if (d == dir) return;
    dirs.push_back(dir);
  };
  for (const char* root : {"CUDA_HOME", "CUDA_PATH"}) {
    const std::string base = env(root);
    if (base.empty()) continue;
    add(base + "/lib64");
    add(base + "/lib");
  }
  for (const auto& site : site_dirs) {
    add(site + "/nvidia/cuda_nvrtc/lib");
    add(site + "/nvidia/cu13/lib");
  }
  return dirs;
}

// NVRTC opens libnvrtc-builtins by name when it first compiles, so a libnvrtc given by path is
// only usable with its builtins beside it (some packagings ship the one without the other).
// They are loaded here, global, so that the lookup succeeds even where the directory is not
// on the loader path. False when there are none.
bool load_builtins_beside(const std::string& library_path) {
  glob_t found{};
  const std::string pattern = library_path.substr(0, library_path.rfind('/')) + "/libnvrtc-builtins.so.*";
  const bool any = glob(pattern.c_str(), 0, nullptr, &found) == 0 && found.gl_pathc > 0;
  for (size_t i = 0; any && i < found.gl_pathc; ++i) dlopen(found.gl_pathv[i], RTLD_NOW | RTLD_GLOBAL);
  globfree(&found);
  return any;
}

std::string numbered(const std::string& source) {
  std::ostringstream out;
  std::istringstream lines(source);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    char prefix[16];
    std::snprintf(prefix, sizeof(prefix), "%5d | ", number);
    out << prefix << line << '\n';
  }
  return out.str();
}

}  // namespace

Nvrtc& Nvrtc::get() { return init({}); }

Nvrtc& Nvrtc::init(const std::vector<std::string>& extra_dirs) {
  static Nvrtc nvrtc;
  std::lock_guard<std::mutex> lock(nvrtc.mutex_);
  // Only a failed attempt is worth repeating, and only when there is somewhere new to look.
  if (!extra_dirs.empty()) nvrtc.extra_dirs_ = extra_dirs;  // toolkit_include_dir() looks there too
  if (!nvrtc.attempted_ || (!nvrtc.status_.ok && !extra_dirs.empty())) {
    try {
      nvrtc.load_locked(extra_dirs);
    } catch (const std::exception& e) {  // keeps get() from throwing, e.g. on bad_alloc
      nvrtc.status_.ok = false;
      nvrtc.status_.error = std::string("NVRTC: ") + e.what();
    }
  }
  return nvrtc;
}

void Nvrtc::load_locked(const std::vector<std::string>& extra_dirs) {
  attempted_ = true;
  status_ = LibraryStatus{};
  std::string failures;

  // An explicit path that does not load is reported, then the usual places are searched.
  const std::string override_path = env("TILEPRIM_NVRTC");
  if (!override_path.empty()) {
    if (try_open(override_path, failures)) return;
    std::fprintf(stderr, "tileprim: TILEPRIM_NVRTC could not be loaded (%s); searching the usual places\n",
                 failures.substr(2, failures.size() - 3).c_str());
  }

  for (const auto& dir : search_dirs(extra_dirs))
    for (const char* name : kLibraryNames)
      if (try_open(dir + "/" + name, failures)) return;
  for (const char* name : kLibraryNames)
    if (try_open(name, failures)) return;  // the loader path: LD_LIBRARY_PATH, ld.so.cache

  status_.error = "NVRTC (libnvrtc.so.13 or libnvrtc.so.12) could not be loaded. Install the "
                  "nvidia-cuda-nvrtc wheel, set CUDA_HOME, or set TILEPRIM_NVRTC to the library. Tried:\n" +
                  failures;
}

bool Nvrtc::try_open(const std::string& candidate, std::string& failures) {
  status_.tried.push_back(candidate);
  if (candidate.find('/') != std::string::npos && is_file(candidate) && !load_builtins_beside(candidate)) {
    failures += "  " + candidate + ": no libnvrtc-builtins.so.* beside it, without which NVRTC cannot compile\n";
    return false;
  }
  if (!library_.open(candidate, failures)) return false;
  std::string missing;
#define TP_RESOLVE(name) library_.resolve(name, #name, missing);
  TP_NVRTC_ENTRY_POINTS(TP_RESOLVE)
#undef TP_RESOLVE
  if (!missing.empty() || nvrtcVersion(&version_.first, &version_.second) != NVRTC_SUCCESS) {
    failures += "  " + candidate + ": " + (missing.empty() ? "nvrtcVersion failed" : "lacks " + missing) + "\n";
    library_.close();
    return false;
  }
  status_.ok = true;
  status_.path = library_.path_of(reinterpret_cast<void*>(nvrtcVersion));
  return true;
}

void Nvrtc::require_loaded() const {
  if (!status_.ok) throw CudaError("NVRTC is unavailable: " + status_.error);
}

void Nvrtc::check(nvrtcResult r, const char* what) const {
  if (r != NVRTC_SUCCESS)
    throw CudaError(std::string(what) + " (" + status_.path + "): " + nvrtcGetErrorString(r));
}

std::pair<int, int> Nvrtc::version() const {
  require_loaded();
  return version_;
}

std::vector<int> Nvrtc::supported_archs() const {
  require_loaded();
  int count = 0;
  check(nvrtcGetNumSupportedArchs(&count), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(count);
  check(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  return archs;
}

Nvrtc::CompileResult Nvrtc::compile(const std::string& source, const std::string& name,
                                    const std::vector<std::string>& options, bool want_cubin) const {
  require_loaded();
  const auto start = std::chrono::steady_clock::now();
  nvrtcProgram program = nullptr;
  check(nvrtcCreateProgram(&program, source.c_str(), name.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  // Destroys the program on every way out, exceptions included.
  struct ProgramGuard {
    const Nvrtc& nvrtc;
    nvrtcProgram& program;
    ~ProgramGuard() { nvrtc.nvrtcDestroyProgram(&program); }
  } guard{*this, program};

  std::vector<const char*> option_pointers;
  for (const auto& option : options) option_pointers.push_back(option.c_str());
  const nvrtcResult compiled =
      nvrtcCompileProgram(program, static_cast<int>(option_pointers.size()), option_pointers.data());

  CompileResult result;
  size_t log_bytes = 0;
  check(nvrtcGetProgramLogSize(program, &log_bytes), "nvrtcGetProgramLogSize");
  result.log.resize(log_bytes);
  if (log_bytes) check(nvrtcGetProgramLog(program, result.log.data()), "nvrtcGetProgramLog");
  while (!result.log.empty() && (result.log.back() == '\0' || result.log.back() == '\n')) result.log.pop_back();

  if (compiled != NVRTC_SUCCESS) {
    std::string joined;
    for (const auto& option : options) joined += " " + option;
    throw CompileError("NVRTC " + std::to_string(version_.first) + "." + std::to_string(version_.second) + " (" +
                       status_.path + ") could not compile " + name + ": " + nvrtcGetErrorString(compiled) +
                       "\noptions:" + joined + "\n" + result.log + "\n\nsource:\n" + numbered(source));
  }

  size_t ptx_bytes = 0;
  check(nvrtcGetPTXSize(program, &ptx_bytes), "nvrtcGetPTXSize");
  result.ptx.resize(ptx_bytes);
  check(nvrtcGetPTX(program, result.ptx.data()), "nvrtcGetPTX");
  if (!result.ptx.empty() && result.ptx.back() == '\0') result.ptx.pop_back();  // the size counts the NUL

  if (want_cubin) {
    size_t cubin_bytes = 0;
    check(nvrtcGetCUBINSize(program, &cubin_bytes), "nvrtcGetCUBINSize");
    if (cubin_bytes == 0)
      throw CudaError("NVRTC made no CUBIN for " + name + ": the options target a virtual arch (compute_XX); "
                      "use --gpu-architecture=sm_XX for a CUBIN");
    result.cubin.resize(cubin_bytes);
    check(nvrtcGetCUBIN(program, result.cubin.data()), "nvrtcGetCUBIN");
  }
  result.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string Nvrtc::toolkit_include_dir() const {
  std::vector<std::string> candidates;
  for (const char* root : {"CUDA_HOME", "CUDA_PATH"})
    if (!env(root).empty()) candidates.push_back(env(root) + "/include");
  if (status_.ok) {
    const auto slash = status_.path.rfind('/');
    if (slash != std::string::npos) candidates.push_back(status_.path.substr(0, slash) + "/../include");
  }
  std::vector<std::string> site_dirs;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    site_dirs = extra_dirs_;
  }
  for (const auto& site : site_dirs) {
    candidates.push_back(site + "/nvidia/cuda_runtime/include");
    candidates.push_back(site + "/nvidia/cu13/include");
  }
  candidates.push_back("/usr/local/cuda/include");
  for (const auto& dir : candidates)
    if (is_file(dir + "/cuda_fp16.h")) return std::filesystem::path(dir).lexically_normal().string();
  return "";
}

}  // namespace tp::cuda
