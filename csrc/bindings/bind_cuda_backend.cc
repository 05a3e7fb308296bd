// tileprim._C.cuda, the backend half: kernels for programs and collectives (tp.lower), device pointers and
// streams, and device buffers Python owns (exported through DLPack).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>

#include "backends/cuda/compiler.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/dlpack.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/kernel_resources.h"
#include "backends/cuda/program_executor.h"
#include "backends/cuda/tile_executor.h"
#include "bindings/bindings.h"
#include "errors.h"
#include "dispatch/plan.h"

namespace py = pybind11;

namespace tp {

namespace {

cuda::CUstream as_stream(std::uintptr_t handle) { return reinterpret_cast<cuda::CUstream>(handle); }

// A DLPack view of a device buffer; the capsule keeps the buffer alive until the consumer
// calls the deleter.
struct DLPackExport {
  dlpack::DLManagedTensor managed{};
  std::shared_ptr<cuda::DeviceBuffer> buffer;
  std::vector<int64_t> shape;
};

py::capsule dlpack_capsule(std::shared_ptr<cuda::DeviceBuffer> buffer, std::vector<int64_t> shape,
                           const std::string& dtype) {
  auto* e = new DLPackExport();
  e->buffer = std::move(buffer);
  e->shape = std::move(shape);
  const DType t = dtype_from_name(dtype, "dtype");
  dlpack::DLTensor& d = e->managed.dl_tensor;
  d.data = reinterpret_cast<void*>(e->buffer->pointer());
  d.device = {dlpack::kDLCUDA, e->buffer->device()};
  d.ndim = static_cast<int32_t>(e->shape.size());
  const uint8_t code = t == DType::bfloat16 ? dlpack::kDLBfloat : is_integer(t) ? dlpack::kDLInt : dlpack::kDLFloat;
  d.dtype = {code, static_cast<uint8_t>(8 * dtype_size(t)), 1};
  d.shape = e->shape.data();
  d.strides = nullptr;
  d.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = [](dlpack::DLManagedTensor* self) { delete static_cast<DLPackExport*>(self->manager_ctx); };
  // A capsule never renamed to "used_dltensor" was never consumed: free it ourselves.
  return py::capsule(&e->managed, "dltensor", [](PyObject* cap) {
    if (PyCapsule_IsValid(cap, "dltensor")) {
      auto* m = static_cast<dlpack::DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
      m->deleter(m);
    }
  });
}

// What tp.lower shows of a compiled kernel, program or not.
py::dict binary_dict(const std::string& source, const std::string& arch, const std::vector<std::string>& options,
                     const cuda::CompiledKernel& binary) {
  py::dict d;
  d["source"] = source;
  d["arch"] = arch;
  d["options"] = options;
  d["ptx"] = binary.ptx;
  d["cubin"] = py::bytes(binary.cubin);
  d["origin"] = binary.origin;
  d["compile_ms"] = binary.compile_ms;
  return d;
}

py::dict residency_dict(const cuda::Residency& r) {
  py::dict d;
  d["blocks"] = r.blocks;
  d["warps"] = r.warps;
  d["max_warps"] = r.max_warps;
  d["limit"] = r.limit;
  return d;
}

// The launch shape of a kernel, program or not.
py::dict launch_dict(const KernelSource& k) {
  py::dict d;
  d["block_threads"] = k.block_threads();
  d["instances"] = k.instances;
  d["rounds"] = k.rounds;
  d["stages"] = k.stages;
  d["window_stages"] = k.window_stages;
  d["chunk_slots"] = k.chunk_slots;
  d["clamped"] = k.clamped;
  d["tiles_per_block"] = k.tiles_per_block();
  d["instances_why"] = k.why;
  d["shared_bytes"] = k.shared_bytes;
  d["min_blocks"] = k.min_blocks;
  py::dict staging;
  for (const auto& [name, how] : k.staging) staging[py::str(name)] = how;
  d["staging"] = staging;
  py::dict paths;  // every kernel parameter but `tiles`
  for (const OperandLaunch& o : k.operands) paths[py::str(o.name)] = path_name(o.path);
  d["paths"] = paths;
  return d;
}

// What the kernel takes of an SM: its registers and stack frame from the CUBIN (None for a PTX
// image) and the blocks an SM of the arch then holds with the launch's shared memory and the
// kernel's own.
py::dict resources_dict(const cuda::CompiledKernel& binary, const std::string& arch, const KernelSource& k) {
  py::dict d;
  const cuda::FunctionResources f = cuda::function_resources(binary.cubin, k.function);
  d["registers"] = f.registers < 0 ? py::object(py::none()) : py::int_(f.registers);
  d["local_bytes"] = f.frame_bytes < 0 ? py::object(py::none()) : py::int_(f.frame_bytes);
  d["barriers"] = f.barriers < 0 ? py::object(py::none()) : py::int_(f.barriers);
  py::object residency = py::none();
  if (f.registers >= 0) {
    residency = residency_dict(
        cuda::residency(arch, k.block_threads(), f.registers, k.shared_bytes + f.static_shared, std::max(f.barriers, 0)));
  }
  d["residency"] = residency;
  return d;
}

// A built kernel as tp.lower shows it: binary, launch shape and resources.
py::dict built_dict(const KernelSource& source, const std::string& arch, const std::vector<std::string>& options,
                    const cuda::CompiledKernel& binary) {
  py::dict d = binary_dict(source.text, arch, options, binary);
  d.attr("update")(launch_dict(source));
  d.attr("update")(resources_dict(binary, arch, source));
  return d;
}

}  // namespace

void bind_cuda_backend(py::module_& m) {
  py::module_ c = m.attr("cuda");

  c.def("configure", &cuda::configure, py::arg("version"), py::arg("include_dir"), py::arg("site_dirs"));
  c.def("header_digest", &cuda::header_digest);
  c.def("compile_arch", &cuda::compile_arch, py::arg("target"),
        "What NVRTC builds for a target: itself when NVRTC knows it, else PTX for an older arch.");
  c.def(
      "build",
      [](const std::shared_ptr<Plan>& plan, const std::string& arch) {
        cuda::BuiltKernel k;
        {
          py::gil_scoped_release release;
          k = cuda::build_kernel(*plan, arch);
        }
        return built_dict(k.source, k.arch, k.options, *k.binary);
      },
      py::arg("plan"), py::arg("arch"),
      "A collective plan's kernel for arch (a tile op's is its program's: build_program): source, PTX, CUBIN and "
      "its launch shape.");
  c.def(
      "build_program",
      [](const std::shared_ptr<ProgramPlan>& plan, const std::string& arch) {
        cuda::BuiltKernel k;
        {
          py::gil_scoped_release release;
          k = cuda::build_program(*plan, arch);
        }
        return built_dict(k.source, k.arch, k.options, *k.binary);
      },
      py::arg("plan"), py::arg("arch"), "The program's one kernel for arch: source, PTX, CUBIN and its launch shape.");
  c.def(
      "residency",
      [](const std::string& arch, int block_threads, int registers, long long shared_bytes, int barriers) {
        return residency_dict(cuda::residency(arch, block_threads, registers, shared_bytes, barriers));
      },
      py::arg("arch"), py::arg("block_threads"), py::arg("registers"), py::arg("shared_bytes"), py::arg("barriers") = 1,
      "Blocks of a kernel one SM of arch holds at once under CUDA's occupancy rules, and the limit that binds.");
  c.def(
      "function_resources",
      [](const py::bytes& cubin, const std::string& function) {
        const cuda::FunctionResources f = cuda::function_resources(cubin, function);
        return py::make_tuple(f.registers, f.frame_bytes, f.static_shared, f.barriers);
      },
      py::arg("cubin"), py::arg("function"),
      "(registers per thread, stack frame bytes, static shared bytes, named barriers per block) of function in a "
      "CUBIN; -1 where unknown.");
  c.def("launch", [](const std::shared_ptr<ProgramPlan>& plan, const std::string& arch) {
    return launch_dict(program_launch(*plan, arch));
  }, py::arg("plan"), py::arg("arch"), "The program kernel's launch shape for arch; nothing is rendered or compiled.");
  c.def("pointer_device", [](std::uintptr_t pointer) {
    cuda::Driver& d = cuda::Driver::get();
    int ordinal = 0;
    d.check(d.cuPointerGetAttribute(&ordinal, cuda::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pointer),
            "cuPointerGetAttribute(device ordinal)");
    return ordinal;
  });
  c.def("synchronize", [](std::uintptr_t stream, int device) {
    py::gil_scoped_release release;
    cuda::synchronize(as_stream(stream), device);
  });

  py::class_<cuda::DeviceBuffer, std::shared_ptr<cuda::DeviceBuffer>>(c, "DeviceBuffer")
      .def(py::init<size_t, int>(), py::arg("nbytes"), py::arg("device"))
      .def_property_readonly("ptr", [](const cuda::DeviceBuffer& b) { return static_cast<std::uintptr_t>(b.pointer()); })
      .def_property_readonly("nbytes", &cuda::DeviceBuffer::bytes)
      .def_property_readonly("device", &cuda::DeviceBuffer::device)
      .def("zero", &cuda::DeviceBuffer::zero, "Every byte 0, before it returns.")
      .def("dlpack", &dlpack_capsule, py::arg("shape"), py::arg("dtype"),
           "A 'dltensor' capsule viewing the buffer as a C-contiguous array");
  py::class_<cuda::MappedHostBuffer, std::shared_ptr<cuda::MappedHostBuffer>>(
      c, "MappedHostBuffer", "Pinned host memory, zeroed, that this process's kernels reach at `ptr` too.")
      .def(py::init<size_t, int>(), py::arg("nbytes"), py::arg("device"))
      .def_property_readonly("ptr", &cuda::MappedHostBuffer::pointer);
}

}  // namespace tp
