#include "backends/cuda/compiler.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/cuda/driver.h"
#include "backends/cuda/nvrtc.h"
#include "backends/cuda/sha256.h"
#include "dispatch/architecture.h"
#include "errors.h"

namespace tp::cuda {

namespace {

struct Config {
  std::string version = "0";
  std::string include_dir;
  std::string header_digest;
};

Config& config() {
  static Config c;
  return c;
}

std::string digest_headers(const std::string& include_dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  const fs::path root = fs::path(include_dir) / "tileprim";
  if (fs::exists(root)) {
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  Sha256 h;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    h.update(fs::relative(f, root).string() + "\n" + std::to_string(text.str().size()) + "\n");
    h.update(text.str());
  }
  return to_hex(h.digest());
}

}  // namespace

void configure(const std::string& package_version, const std::string& include_dir,
               const std::vector<std::string>& site_dirs) {
  config().version = package_version;
  config().include_dir = include_dir;
  config().header_digest = digest_headers(include_dir);
  KernelCache::get().set_package_version(package_version);
  Nvrtc::init(site_dirs);
}

std::string header_digest() { return config().header_digest; }

std::string compile_arch(const std::string& target) {
  const int number = sm_version(target);
  const std::vector<int> known = Nvrtc::get().supported_archs();
  if (target.rfind("sm_", 0) == 0 && std::find(known.begin(), known.end(), number) != known.end()) return target;
  int newest = 0;
  for (int a : known) {
    if (a <= number) newest = std::max(newest, a);
  }
  if (newest == 0) throw CudaError("NVRTC knows no architecture at or below sm_" + std::to_string(number));
  return "compute_" + std::to_string(newest);
}

std::vector<std::string> kernel_options(const std::string& source) {
  std::vector<std::string> options = {"-std=c++17", "--fmad=false",  // one rounding per op, as the CPU backend
                                      "-default-device", "-lineinfo", "-I" + config().include_dir};
  if (source.find("#define TP_WITH_") != std::string::npos) {
    const std::string dir = Nvrtc::get().toolkit_include_dir();
    if (dir.empty()) {
      throw CudaError("float16/bfloat16 kernels need cuda_fp16.h and cuda_bf16.h, which were found in none of "
                      "$CUDA_HOME/include, $CUDA_PATH/include, next to libnvrtc, the NVIDIA wheels or "
                      "/usr/local/cuda/include; install them with pip install \"tileprim[cuda13]\" or set CUDA_HOME");
    }
    options.push_back("-I" + dir);
  }
  return options;
}

std::shared_ptr<const CompiledKernel> compile_cached(const std::string& source, const std::string& arch,
                                                     const std::vector<std::string>& options) {
  return compile_cached(source, arch, options, config().version, config().header_digest);
}

std::shared_ptr<const CompiledKernel> compile_cached(const std::string& source, const std::string& arch,
                                                     const std::vector<std::string>& options,
                                                     const std::string& package_version,
                                                     const std::string& header_digest) {
  // a kernel of bfloat16 values (its head defines TP_WITH_BF16 for the device headers) needs the
  // bfloat16 arithmetic of sm_80 on: refused by name before NVRTC fails on the headers
  if (source.find("#define TP_WITH_BF16") != std::string::npos) {
    const int sm = sm_version(arch);
    if (sm != 0 && sm < 80) {
      throw ValueError("dtype: bfloat16 kernels need sm_80 or later (bfloat16 arithmetic); target " + arch +
                       " has none (use float16 or float32 on this GPU, or a newer target)");
    }
  }
  const Nvrtc& nvrtc = Nvrtc::get();
  const auto [major, minor] = nvrtc.version();
  const CacheKey key{package_version, header_digest, std::to_string(major) + "." + std::to_string(minor),
                     arch, options, source};
  return KernelCache::get().get_or_compile(key, [&] {
    std::vector<std::string> with_arch = options;
    with_arch.push_back("--gpu-architecture=" + arch);
    // sm_XX targets get SASS; compute_XX targets are PTX only.
    Nvrtc::CompileResult r = nvrtc.compile(source, "tileprim_kernel.cu", with_arch, arch.rfind("sm_", 0) == 0);
    return CompiledKernel{std::move(r.ptx), std::move(r.cubin), "compiled", r.milliseconds};
  });
}

}  // namespace tp::cuda
