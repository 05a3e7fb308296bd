// What the collectives across processes need from the core: ordered flags in shared host
// memory (every transport's rendezvous), and CUDA IPC (tileprim._C.cuda).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>

#include "backends/cpu/host_flags.h"
#include "backends/cuda/cuda_api.h"
#include "backends/cuda/ipc.h"
#include "bindings/bindings.h"
#include "tileprim/comm/chain.cuh"
#include "tileprim/comm/signals.cuh"

namespace py = pybind11;

namespace tp {

void bind_comm(py::module_& m) {
  m.def("publish_flag", &cpu::publish_flag, py::arg("address"), py::arg("value"),
        "Stores `value` at the 8-byte-aligned host `address` with release order.");
  m.def("raise_flag", &cpu::raise_flag, py::arg("address"), py::arg("value"),
        "Stores `value` at the 8-byte-aligned host `address` unless it holds as much already (release order).");
  m.def("observe_flag", &cpu::observe_flag, py::arg("address"),
        "Loads the 8-byte value at the host `address` with acquire order.");
  m.def(
      "await_flags",
      [](const std::vector<std::uintptr_t>& addresses, std::uint64_t value, double seconds) {
        py::gil_scoped_release release;  // the watchdog's thread runs meanwhile
        return cpu::await_flags(addresses, value, seconds);
      },
      py::arg("addresses"), py::arg("value"), py::arg("seconds"),
      "Spins up to `seconds` until every flag at `addresses` holds at least `value`; returns the "
      "indices of those that still hold less (acquire order).");
  m.def(
      "buffer_address",
      [](const py::buffer& b) { return reinterpret_cast<std::uintptr_t>(b.request(true).ptr); },
      py::arg("buffer"), "The address of a writable buffer's first byte (valid while the buffer lives).");
  py::module_ cuda = m.attr("cuda");
  cuda.attr("SIGNAL_PAD_BYTES") = sizeof(signals::Pad);  // a rank's ready and done flags
  cuda.attr("RANK_MEMORY_BYTES") = treduce::chain::kRankBytes;  // its pad, then its chain flags and staging
  cuda.attr("IPC_HANDLE_BYTES") = sizeof(cuda::CUipcMemHandle);
  cuda.def(
      "ipc_export",
      [](std::uint64_t pointer, int device) {
        auto [handle, offset] = cuda::ipc_export(pointer, device);
        return py::make_tuple(py::bytes(handle), offset);
      },
      py::arg("pointer"), py::arg("device"), "(handle, offset): the allocation `pointer` lies in, for ipc_open.");
  cuda.def(
      "ipc_open", [](const py::bytes& handle, int device) { return cuda::ipc_open(handle, device); },
      py::arg("handle"), py::arg("device"), "Maps another process's allocation on `device`; its base pointer.");
  cuda.def("ipc_close", &cuda::ipc_close, py::arg("base"), py::arg("device"));
  cuda.def("arrive", &cuda::arrive, py::arg("pads"), py::arg("abandoned"), py::arg("epoch"), py::arg("self"),
           py::arg("workers"), py::arg("timeout"), py::arg("device"), py::arg("stream"),
           "On `stream`: rank `self` is ready at `epoch` (in every worker's pad; pads: every rank's); the stream "
           "waits until the workers are done (pads[self] says so) or this rank's host abandons the call (raises "
           "the host flag at `abandoned` to `epoch`); past `timeout` seconds it traps.");
  cuda.def("raise_flag", &cuda::raise_flag, py::arg("pad"), py::arg("epoch"), py::arg("rank"), py::arg("done"),
           py::arg("device"),
           "Raises `rank`'s ready (done=False) or done flag on the pad to `epoch` from a private stream: a "
           "failed call's way out.");
  cuda.def("raise_chain_flags", &cuda::raise_chain_flags, py::arg("pad"), py::arg("epoch"), py::arg("device"),
           "Raises every chain flag in the memory after the pad past call `epoch`'s steps, from a private stream: "
           "a failed chain call's way out.");
}

}  // namespace tp
