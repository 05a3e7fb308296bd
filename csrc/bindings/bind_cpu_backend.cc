#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "dispatch/registry.h"
#include "errors.h"

namespace py = pybind11;

namespace tp {

void bind_cpu_backend(py::module_& m) {
  // Runs a plan over `tiles` tiles: each array C-contiguous as [tiles][tile]; the output
  // holds the old values when the call accumulates.
  m.def(
      "run_cpu",
      [](const Plan& plan, const std::vector<std::optional<py::array>>& inputs, py::array output, long long tiles) {
        HostTensors io;
        io.tiles = tiles;
        for (const auto& a : inputs) io.inputs.push_back(a ? a->data() : nullptr);
        io.output = output.mutable_data();
        py::gil_scoped_release release;
        plan.impl->run_cpu(plan, io);
      },
      py::arg("plan"), py::arg("inputs"), py::arg("output"), py::arg("tiles"));
}

}  // namespace tp
