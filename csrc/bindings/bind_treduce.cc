// tileprim._C's treduce: its options as one value (TreduceOptions), the call dispatch plans
// from them, the one rule for where dst may lie, and the plan dispatch would make on GPUs
// described rather than present (the cost model's choice, testable without them).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bindings/bindings.h"
#include "dispatch/architecture.h"
#include "dispatch/plan_cache.h"
#include "dispatch/registry.h"
#include "dispatch/validate.h"
#include "errors.h"
#include "variants/comm/dst_overlap.h"

namespace py = pybind11;

namespace tp {

namespace {

std::vector<int> dst_overlaps(const std::vector<TileRef>& ranks, const TileRef& dst,
                              const std::vector<std::uintptr_t>& pointers, std::uintptr_t dst_pointer, int root) {
  if (pointers.size() != ranks.size()) {
    throw ValueError("pointers: " + std::to_string(pointers.size()) + " for " + std::to_string(ranks.size()) +
                     " ranks");
  }
  return treduce::dst_overlaps(ranks, dst, pointers.data(), dst_pointer, root);
}

}  // namespace

void bind_treduce(py::module_& m) {
  py::class_<TreduceOptions>(m, "TreduceOptions")
      .def(py::init([](const std::string& op, int root, long long tile_rows, long long tile_cols, bool pingpong,
                       const std::string& valid, const std::string& accumulate, const std::string& transport) {
             return TreduceOptions{op, root, tile_rows, tile_cols, pingpong, valid, accumulate, transport};
           }),
           py::arg("op"), py::arg("root"), py::arg("tile_rows"), py::arg("tile_cols"), py::arg("pingpong"),
           py::arg("valid"), py::arg("accumulate"), py::arg("transport"))
      .def_readonly("op", &TreduceOptions::op)
      .def_readonly("root", &TreduceOptions::root)
      .def_readonly("tile_rows", &TreduceOptions::tile_rows)
      .def_readonly("tile_cols", &TreduceOptions::tile_cols)
      .def_readonly("pingpong", &TreduceOptions::pingpong)
      .def_readonly("valid", &TreduceOptions::valid)
      .def_readonly("accumulate", &TreduceOptions::accumulate)
      .def_readonly("transport", &TreduceOptions::transport)
      .def("__str__", &TreduceOptions::str);

  m.def(
      "treduce_call",
      [](std::vector<TileRef> ranks, TileRef dst, const TreduceOptions& options, const std::string& dispatch) {
        OpCall c;
        c.def = &op_def("treduce");
        c.inputs = std::move(ranks);
        c.output = std::move(dst);
        c.treduce = options;
        c.dispatch = dispatch;
        return c;
      },
      py::arg("ranks"), py::arg("dst"), py::arg("options"), py::arg("dispatch"),
      "The OpCall of a treduce of these ranks into dst (for prepare); dispatch: a forced variant or ''.");

  m.def("treduce_dst_overlaps", &dst_overlaps, py::arg("ranks"), py::arg("dst"), py::arg("pointers"),
        py::arg("dst_pointer"), py::arg("root"),
        "The ranks whose source at pointers[r] dst at `dst_pointer` may meet, other than as the root's tensor "
        "itself: the non-root ones ascending, then the root (by extents; a pointer of 0: a rank not here).");
  m.def(
      "treduce_dst_overlaps",
      [](const BoundPlan& bound, const std::vector<std::uintptr_t>& pointers, std::uintptr_t dst_pointer) {
        const OpCall& call = bound.plan().call;
        return dst_overlaps(call.inputs, call.output, pointers, dst_pointer, call.treduce->root);
      },
      py::arg("bound"), py::arg("pointers"), py::arg("dst_pointer"),
      "The same, for the ranks and dst of a bound treduce plan (laid out as it was bound).");

  m.def(
      "treduce_plan_on",
      [](OpCall call, const std::string& target, int multiprocessors, bool peer_access) {
        DispatchContext ctx;
        ctx.target = target;
        ctx.sm_version = sm_version(target);
        ctx.backend = "cuda";
        ctx.multiprocessors = multiprocessors;
        ctx.nccl = true;
        for (const TileRef& t : call.inputs) {
          ctx.devices.push_back(t.device);
          ctx.device_targets.push_back(target);
        }
        for (int a : ctx.devices) {
          std::vector<bool> row;
          for (int b : ctx.devices) row.push_back(a == b || peer_access);
          ctx.peer.push_back(row);
        }
        validate_call(call, ctx);
        return std::const_pointer_cast<Plan>(Registry::instance().choose(call, ctx));
      },
      py::arg("call"), py::arg("target"), py::arg("multiprocessors"), py::arg("peer_access") = true,
      "The plan dispatch makes of a treduce call whose ranks lie on the GPUs its TileRefs name, each of `target` "
      "with `multiprocessors` SMs (reaching each other where peer_access): nothing is bound or run, no GPU is "
      "needed. The ranks' transport is the call's options'.");
}

}  // namespace tp
