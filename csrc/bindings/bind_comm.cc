// What the collectives across processes need from the core: ordered flags in shared host
// memory (every transport's rendezvous).
#include <pybind11/pybind11.h>

#include <cstdint>

#include "backends/cpu/host_flags.h"
#include "bindings/bindings.h"

namespace py = pybind11;

namespace tp {

void bind_comm(py::module_& m) {
  m.def("publish_flag", &cpu::publish_flag, py::arg("address"), py::arg("value"),
        "Stores `value` at the 8-byte-aligned host `address` with release order.");
  m.def("observe_flag", &cpu::observe_flag, py::arg("address"),
        "Loads the 8-byte value at the host `address` with acquire order.");
  m.def(
      "buffer_address",
      [](const py::buffer& b) { return reinterpret_cast<std::uintptr_t>(b.request(true).ptr); },
      py::arg("buffer"), "The address of a writable buffer's first byte (valid while the buffer lives).");
}

}  // namespace tp
