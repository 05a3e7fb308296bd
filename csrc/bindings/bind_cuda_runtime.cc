// tileprim._C.cuda: the run-time CUDA layer (driver, NVRTC, kernel cache) for the Python side.
// Nothing here loads a library at import; each call loads what it needs on first use.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "backends/cuda/compiler.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/kernel_cache.h"
#include "backends/cuda/nvrtc.h"
#include "backends/cuda/sha256.h"
#include "bindings/bindings.h"

namespace py = pybind11;

namespace tp {

namespace {

using cuda::CompiledKernel;
using cuda::Driver;
using cuda::KernelCache;
using cuda::LibraryStatus;
using cuda::Nvrtc;

py::dict status_dict(const LibraryStatus& status) {
  py::dict out;
  out["ok"] = status.ok;
  out["path"] = status.path;
  out["error"] = status.error;
  out["tried"] = status.tried;
  return out;
}

// The cache directory is per package version; Python's tileprim.__version__ is the default.
void use_package_version(const std::optional<std::string>& version) {
  KernelCache::get().set_package_version(
      version ? *version : py::module_::import("tileprim._version").attr("__version__").cast<std::string>());
}

// A compiled kernel's images, and how it came (`how`: its key and value).
py::dict images_dict(const std::string& ptx, const std::string& cubin, const char* how_key, const py::object& how,
                     const char* ms_key, double ms) {
  py::dict out;
  out["ptx"] = ptx;
  out["cubin"] = py::bytes(cubin);
  out[how_key] = how;
  out[ms_key] = ms;
  return out;
}

py::dict kernel_dict(const CompiledKernel& kernel) {
  return images_dict(kernel.ptx, kernel.cubin, "origin", py::str(kernel.origin), "compile_ms", kernel.compile_ms);
}

}  // namespace

void bind_cuda_runtime(py::module_& m) {
  py::module_ cuda = m.def_submodule("cuda", "CUDA driver, NVRTC and the kernel cache, loaded on first use");
  py::register_exception<cuda::CompileError>(cuda, "CompileError", PyExc_RuntimeError);

  // ---- driver ----
  cuda.def("driver_status", [] {
    const Driver& driver = Driver::get();
    return status_dict(driver.status());
  });
  cuda.def("device_count", [] { return Driver::get().device_count(); });
  cuda.def("driver_version", [] { return Driver::get().driver_version(); });
  cuda.def(
      "device_info",
      [](int device) {
        Driver& driver = Driver::get();
        py::dict out;
        out["name"] = driver.device_name(device);
        out["cc"] = driver.compute_capability(device);
        out["sms"] = driver.multiprocessors(device);
        return out;
      },
      py::arg("device"));
  cuda.def("make_current", [](int device) { Driver::get().make_current(device); }, py::arg("device"));

  // ---- NVRTC ----
  cuda.def(
      "nvrtc_init", [](const std::vector<std::string>& extra_dirs) { Nvrtc::init(extra_dirs); },
      py::arg("extra_dirs"), "Load NVRTC, also looking in the NVIDIA wheels under these site-packages dirs.");
  cuda.def("nvrtc_status", [] {
    const Nvrtc& nvrtc = Nvrtc::get();
    py::dict out = status_dict(nvrtc.status());
    if (nvrtc.status().ok) out["version"] = py::make_tuple(nvrtc.version().first, nvrtc.version().second);
    return out;
  });
  cuda.def("supported_archs", [] { return Nvrtc::get().supported_archs(); });
  cuda.def("toolkit_include_dir", [] { return Nvrtc::get().toolkit_include_dir(); });
  cuda.def(
      "compile",
      [](const std::string& source, const std::string& name, const std::vector<std::string>& options,
         bool want_cubin) {
        Nvrtc::CompileResult result;
        {
          py::gil_scoped_release release;
          result = Nvrtc::get().compile(source, name, options, want_cubin);
        }
        return images_dict(result.ptx, result.cubin, "log", py::str(result.log), "ms", result.milliseconds);
      },
      py::arg("source"), py::arg("name"), py::arg("options"), py::arg("want_cubin"),
      "Compile CUDA source with NVRTC; raises CompileError with the log and the numbered source.");

  // ---- kernel cache ----
  cuda.def(
      "sha256_hex", [](const py::bytes& data) { return cuda::sha256_hex(std::string(data)); }, py::arg("data"));
  cuda.def(
      "cache_get_or_compile",
      [](const std::string& version, const std::string& header_digest, const std::string& arch,
         const std::vector<std::string>& options, const std::string& source) {
        std::shared_ptr<const CompiledKernel> kernel;
        {
          py::gil_scoped_release release;
          kernel = cuda::compile_cached(source, arch, options, version, header_digest);
        }
        return kernel_dict(*kernel);
      },
      py::arg("version"), py::arg("header_digest"), py::arg("arch"), py::arg("options"), py::arg("source"),
      "The kernel for this key from memory, else disk, else NVRTC (with --gpu-architecture=arch added).");
  cuda.def(
      "cache_clear",
      [](bool disk, const std::optional<std::string>& version) {
        use_package_version(version);
        KernelCache::get().clear(disk);
      },
      py::arg("disk"), py::arg("version") = py::none());
  cuda.def(
      "cache_directory",
      [](const std::optional<std::string>& version) {
        use_package_version(version);
        return KernelCache::get().directory();
      },
      py::arg("version") = py::none());
  cuda.def("cache_disk_enabled", [] { return KernelCache::get().disk_enabled(); });
}

}  // namespace tp
