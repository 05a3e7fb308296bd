#include "backends/cuda/launcher.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "backends/cuda/driver.h"
#include "backends/cuda/nvrtc.h"
#include "backends/cuda/sha256.h"
#include "dispatch/registry.h"

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

// Scalar operands are kernel arguments, so their values do not change the kernel.
std::string kernel_key(const Plan& plan, const std::string& arch) {
  OpCall shape = plan.call;
  for (TileRef& t : shape.inputs) t.value = 0;
  return plan.variant + "|" + arch + "|" + shape.str();
}

std::vector<std::string> compile_options(const std::string& arch, bool needs_toolkit_headers) {
  std::vector<std::string> options = {"--gpu-architecture=" + arch, "-std=c++17",
                                      "--fmad=false",  // one rounding per op, as the CPU backend
                                      "-default-device", "-lineinfo", "-I" + config().include_dir};
  if (needs_toolkit_headers) {
    const std::string dir = Nvrtc::get().toolkit_include_dir();
    if (dir.empty()) {
      throw CudaError("float16/bfloat16 kernels need cuda_fp16.h and cuda_bf16.h, which were found in none of "
                      "$CUDA_HOME/include, $CUDA_PATH/include, next to libnvrtc, the NVIDIA wheels or "
                      "/usr/local/cuda/include; install the CUDA toolkit headers (pip install "
                      "nvidia-cuda-runtime) or set CUDA_HOME");
    }
    options.push_back("-I" + dir);
  }
  return options;
}

struct Loaded {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  BuiltKernel kernel;
};

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

std::string arch_for_compute_capability(int cc) {
  const std::vector<int> known = Nvrtc::get().supported_archs();
  const bool specific = cc == 90 || cc == 100 || cc == 103;  // wgmma / tcgen05 live behind the 'a' suffix
  if (std::find(known.begin(), known.end(), cc) != known.end()) {
    return "sm_" + std::to_string(cc) + (specific ? "a" : "");
  }
  int newest = 0;
  for (int a : known) {
    if (a <= cc) newest = std::max(newest, a);
  }
  if (newest == 0) throw CudaError("NVRTC knows no architecture at or below sm_" + std::to_string(cc));
  return "compute_" + std::to_string(newest);
}

BuiltKernel build(const Plan& plan, const std::string& arch) {
  KernelSource k;
  k.comment = plan.call.str() + " [" + plan.variant + "]";
  plan.impl->emit_cuda(plan, k);
  k.finish(default_instances(plan.call.scope));
  BuiltKernel out;
  out.source = k.source();
  out.arch = arch;
  out.options = compile_options(arch, out.source.find("#define TP_WITH_") != std::string::npos);
  out.block_threads = k.block_threads();
  out.instances = k.instances();
  out.shared_bytes = k.shared_bytes();
  Nvrtc& nvrtc = Nvrtc::get();
  const auto [major, minor] = nvrtc.version();
  const CacheKey key{config().version, config().header_digest, std::to_string(major) + "." + std::to_string(minor),
                     arch, out.options, out.source};
  const bool want_cubin = arch.rfind("sm_", 0) == 0;
  out.binary = KernelCache::get().get_or_compile(key, [&] {
    Nvrtc::CompileResult r = nvrtc.compile(out.source, "tileprim_kernel.cu", out.options, want_cubin);
    return CompiledKernel{r.ptx, r.cubin, "compiled", r.milliseconds};
  });
  return out;
}

void launch(const Plan& plan, const LaunchArgs& args) {
  static std::mutex mutex;
  static std::unordered_map<std::string, Loaded> loaded;  // device|kernel key -> module
  Driver& driver = Driver::get();
  driver.make_current(args.device);
  const std::string arch = arch_for_compute_capability(driver.compute_capability(args.device));
  const std::string key = std::to_string(args.device) + "|" + kernel_key(plan, arch);
  Loaded* l;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = loaded.find(key);
    if (it == loaded.end()) {
      Loaded fresh;
      fresh.kernel = build(plan, arch);
      const std::string& image = fresh.kernel.binary->cubin.empty() ? fresh.kernel.binary->ptx
                                                                       : fresh.kernel.binary->cubin;
      driver.check(driver.cuModuleLoadData(&fresh.module, image.c_str()), "cuModuleLoadData");
      driver.check(driver.cuModuleGetFunction(&fresh.function, fresh.module, "tp_kernel"), "cuModuleGetFunction");
      if (fresh.kernel.shared_bytes > 48 * 1024) {
        driver.check(driver.cuFuncSetAttribute(fresh.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                               static_cast<int>(fresh.kernel.shared_bytes)),
                     "cuFuncSetAttribute(max dynamic shared memory)");
      }
      it = loaded.emplace(key, std::move(fresh)).first;
    }
    l = &it->second;
  }
  if (args.tiles == 0) return;
  const long long blocks = (args.tiles + l->kernel.instances - 1) / l->kernel.instances;
  CUdeviceptr in0 = args.inputs[0], in1 = args.inputs[1], in2 = args.inputs[2], out = args.output;
  double s0 = args.scalars[0], s1 = args.scalars[1], s2 = args.scalars[2];
  long long tiles = args.tiles;
  void* params[] = {&in0, &in1, &in2, &out, &s0, &s1, &s2, &tiles};
  driver.check(driver.cuLaunchKernel(l->function, static_cast<unsigned>(blocks), 1, 1,
                                     static_cast<unsigned>(l->kernel.block_threads), 1, 1,
                                     static_cast<unsigned>(l->kernel.shared_bytes), args.stream, params, nullptr),
               "cuLaunchKernel");
}

DeviceBuffer::DeviceBuffer(size_t bytes, int device) : bytes_(bytes), device_(device) {
  Driver& d = Driver::get();
  d.make_current(device);
  d.check(d.cuMemAlloc(&pointer_, std::max<size_t>(bytes, 1)), "cuMemAlloc");
}

DeviceBuffer::~DeviceBuffer() {
  Driver& d = Driver::get();
  d.make_current(device_);
  d.cuMemFree(pointer_);
}

void DeviceBuffer::copy_from_host(const void* src, size_t bytes, CUstream stream) {
  Driver& d = Driver::get();
  d.make_current(device_);
  d.check(d.cuMemcpyHtoDAsync(pointer_, src, bytes, stream), "cuMemcpyHtoDAsync");
}

void DeviceBuffer::copy_to_host(void* dst, size_t bytes, CUstream stream) const {
  Driver& d = Driver::get();
  d.make_current(device_);
  d.check(d.cuMemcpyDtoHAsync(dst, pointer_, bytes, stream), "cuMemcpyDtoHAsync");
}

void DeviceBuffer::fill_bytes(unsigned char value, CUstream stream) {
  Driver& d = Driver::get();
  d.make_current(device_);
  d.check(d.cuMemsetD8(pointer_, value, bytes_), "cuMemsetD8");
  synchronize(stream, device_);  // cuMemsetD8 runs on the legacy stream; order it before `stream`
}

void synchronize(CUstream stream, int device) {
  Driver& d = Driver::get();
  d.make_current(device);
  d.check(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
}

}  // namespace tp::cuda
