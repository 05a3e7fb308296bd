// NCCL (tileprim._C.nccl): loaded on request, never at import; the communicator that treduce's
// NCCL transport sends and receives on.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>

#include "backends/nccl/nccl_communicator.h"
#include "backends/nccl/nccl_library.h"
#include "bindings/bindings.h"

namespace py = pybind11;

namespace tp {

void bind_nccl(py::module_& m) {
  py::module_ n = m.def_submodule("nccl", "NCCL, loaded at run time");
  n.def(
      "load",
      [](const std::vector<std::string>& site_dirs) {
        const nccl::Library& library = nccl::Library::load(site_dirs);
        const auto& s = library.status();
        py::dict out;
        out["ok"] = s.ok;
        out["path"] = s.path;
        out["error"] = s.error;
        out["tried"] = s.tried;
        out["version"] = library.version();
        return out;
      },
      py::arg("site_dirs"), "Loads NCCL (once it has loaded, later calls only report): ok, path, version, error, tried.");
  n.def("unique_id", [] { return py::bytes(nccl::unique_id()); }, "ncclGetUniqueId's 128 bytes.");
  py::class_<nccl::Communicator>(n, "Communicator")
      .def(py::init([](const py::bytes& id, int world_size, int rank, int device, double timeout) {
             std::string bytes = id;
             py::gil_scoped_release release;  // collective: waits for the other ranks
             return new nccl::Communicator(bytes, world_size, rank, device, timeout);
           }),
           py::arg("unique_id"), py::arg("world_size"), py::arg("rank"), py::arg("device"), py::arg("timeout"))
      .def(
          "send",
          [](nccl::Communicator& c, std::uintptr_t source, size_t bytes, size_t chunk_bytes, int peer,
             std::uintptr_t stream, double timeout) {
            py::gil_scoped_release release;  // NCCL may wait to connect: the watchdog's thread runs meanwhile
            c.send(source, bytes, chunk_bytes, peer, reinterpret_cast<nccl::CUstream>(stream), timeout);
          },
          py::arg("source"), py::arg("bytes"), py::arg("chunk_bytes"), py::arg("peer"), py::arg("stream"),
          py::arg("timeout"))
      .def(
          "gather",
          [](nccl::Communicator& c, size_t bytes, size_t chunk_bytes, const std::vector<int>& peers,
             std::uintptr_t stream, const nccl::Communicator::Fold& fold, double timeout) {
            py::gil_scoped_release release;  // the watchdog's thread runs meanwhile; a fold takes it back
            c.gather(bytes, chunk_bytes, peers, reinterpret_cast<nccl::CUstream>(stream), fold, timeout);
          },
          py::arg("bytes"), py::arg("chunk_bytes"), py::arg("peers"), py::arg("stream"), py::arg("fold"),
          py::arg("timeout"),
          "Receives every peer's bytes chunk by chunk into staging; fold(offset, length, staged) folds each "
          "on `stream` as it lands.")
      .def(
          "exchange_shards",
          [](nccl::Communicator& c, std::uintptr_t source, std::uintptr_t out, const std::vector<size_t>& bounds,
             const std::vector<int>& workers, int root, size_t step_bytes, std::uintptr_t stream,
             const nccl::Communicator::ShardFold& shard_fold, double timeout) {
            py::gil_scoped_release release;  // the watchdog's thread runs meanwhile; a fold takes it back
            c.exchange_shards(source, out, bounds, workers, root, step_bytes, reinterpret_cast<nccl::CUstream>(stream),
                              shard_fold, timeout);
          },
          py::arg("source"), py::arg("out"), py::arg("bounds"), py::arg("workers"), py::arg("root"),
          py::arg("step_bytes"), py::arg("stream"), py::arg("shard_fold"), py::arg("timeout"),
          "scatter_gather's exchange: shard k (bytes [bounds[k], bounds[k+1])) is folded by workers[k], "
          "step_bytes a step; shard_fold(offset, length, copies, result) folds a worker's step on `stream` "
          "(copies[r]: rank r's copy); the root receives the results into `out`.")
      .def(
          "chain",
          [](nccl::Communicator& c, std::uintptr_t source, std::uintptr_t out, size_t bytes, size_t chunk_bytes,
             const std::vector<int>& order, std::uintptr_t stream, const nccl::Communicator::LinkFold& link_fold,
             double timeout) {
            py::gil_scoped_release release;  // the watchdog's thread runs meanwhile; a fold takes it back
            c.chain(source, out, bytes, chunk_bytes, order, reinterpret_cast<nccl::CUstream>(stream), link_fold,
                    timeout);
          },
          py::arg("source"), py::arg("out"), py::arg("bytes"), py::arg("chunk_bytes"), py::arg("order"),
          py::arg("stream"), py::arg("link_fold"), py::arg("timeout"),
          "The chain's exchange along `order` (the root first): the root sends `source` chunk by chunk and "
          "receives the result into `out`; every other rank receives the partial, folds its own chunk in with "
          "link_fold(offset, length, partial, result) on `stream` and sends the result on.")
      .def("timings", &nccl::Communicator::timings, py::call_guard<py::gil_scoped_release>(),
           "Where this rank's host time went since the last ask: seconds enqueueing NCCL groups and folding, their "
           "counts, and calls.")
      .def("abort", &nccl::Communicator::abort, py::call_guard<py::gil_scoped_release>(),
           "Ends the communicator now, pending operations included (from any thread).")
      .def("aborted", &nccl::Communicator::aborted, py::call_guard<py::gil_scoped_release>(),
           "Whether the communicator was aborted (by abort(), or by a call it could not enqueue).")
      .def(
          "watch",
          [](nccl::Communicator& c, std::uintptr_t stream, double timeout) {
            c.watch(reinterpret_cast<nccl::CUstream>(stream), timeout);
          },
          py::arg("stream"), py::arg("timeout"), "The work just enqueued on `stream` is a call in flight.")
      .def("oldest_in_flight", &nccl::Communicator::oldest_in_flight, py::call_guard<py::gil_scoped_release>(),
           "The oldest call still in flight's (seconds since it was watched, its timeout), or None.")
      .def("async_error", &nccl::Communicator::async_error, py::call_guard<py::gil_scoped_release>(),
           "NCCL's asynchronous error, or ''.");
}

}  // namespace tp
