#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "backends/cuda/codegen.h"
#include "bindings/bindings.h"
#include "dispatch/registry.h"

namespace py = pybind11;

namespace tp {

void bind_cuda_codegen(py::module_& m) {
  // The CUDA translation unit of a plan and its launch frame; needs no GPU and no NVRTC.
  m.def("generate_cuda", [](const Plan& plan) {
    KernelSource k;
    k.comment = plan.call.str() + " [" + plan.variant + "]";
    plan.impl->emit_cuda(plan, k);
    py::dict d;
    d["source"] = k.source();
    d["threads"] = k.threads;
    d["instances"] = k.instances;
    d["block_threads"] = k.block_threads();
    d["shared_bytes"] = k.shared_bytes * k.instances;
    return d;
  });
}

}  // namespace tp
