// tileprim._C's tile programs: the traced steps (or a standalone call, the program of one step) in,
// a bound program out: its ProgramPlan and its runs on host or device arrays.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>

#include "bindings/bindings.h"
#include "errors.h"
#include "program/bound_program.h"
#include "program/program_plan.h"

namespace py = pybind11;

namespace tp {

namespace {

StepSpec step_of(const py::dict& d) {
  StepSpec s;
  s.op = d["op"].cast<std::string>();
  s.operands = d["operands"].cast<std::vector<int>>();
  s.scalars = d["scalars"].cast<std::vector<double>>();
  if (d.contains("scalar_args")) s.scalar_args = d["scalar_args"].cast<std::vector<int>>();
  s.axes = d["axes"].cast<std::vector<int>>();
  s.keepdims = d["keepdims"].cast<bool>();
  s.dtype = d["dtype"].cast<std::string>();
  s.storage = d["storage"].cast<std::string>();
  s.layout = d["layout"].cast<std::optional<TileLayout>>();
  s.out_layout = d["out_layout"].cast<std::optional<TileLayout>>();
  s.dispatch = d["dispatch"].cast<std::string>();
  for (const auto& [k, v] : d["config"].cast<py::dict>()) {
    const std::string key = py::str(k);
    s.config[key] = config_value(key, v);
  }
  s.where = d["where"].cast<std::string>();
  s.name = d["name"].cast<std::string>();
  return s;
}

py::dict value_dict(const ProgramValue& v) {
  py::dict d;
  d["name"] = v.name;
  d["dtype"] = std::string(dtype_name(v.dtype));
  d["shape"] = v.shape;
  d["storage"] = v.layout ? std::string(storage_name(v.storage)) : std::string("");
  d["layout"] = v.layout ? v.layout->str() : std::string("");
  d["input"] = v.input;
  d["batch_broadcast"] = v.batch_broadcast;
  d["written"] = v.written;
  d["last_read"] = v.last_read;
  d["shared_offset"] = v.shared_offset;
  d["shared_bytes"] = v.shared_bytes;
  return d;
}

py::dict step_dict(const ProgramStep& s) {
  py::dict d;
  d["op"] = s.op;
  d["operands"] = s.operands;
  d["scalars"] = s.scalars;
  d["scalar_args"] = s.scalar_args;
  d["result"] = s.result;
  d["where"] = s.where;
  d["inserted"] = s.inserted;
  d["reasons"] = s.reasons;
  d["sync_before"] = s.sync_before;
  return d;
}


}  // namespace

bool python_interrupted() {
  py::gil_scoped_acquire gil;
  return PyErr_CheckSignals() != 0;
}

namespace {

std::uintptr_t host_address(const py::handle& a, const char* what) {
  if (!py::isinstance<py::array>(a)) throw TypeError(std::string(what) + ": expected NumPy arrays");
  auto arr = py::reinterpret_borrow<py::array>(a);
  if (!(arr.flags() & py::array::c_style)) throw ValueError(std::string(what) + ": expected C-contiguous arrays");
  return reinterpret_cast<std::uintptr_t>(arr.data());
}

void run_host(const BoundProgram& b, ProgramArgs& args) {
  run_released(args, [&](const ProgramArgs& a) { b.runner().run(a); });
}

}  // namespace

std::vector<std::uintptr_t> host_addresses(const py::list& arrays, const char* what) {
  std::vector<std::uintptr_t> out;
  out.reserve(arrays.size());
  for (const py::handle& a : arrays) out.push_back(host_address(a, what));
  return out;
}

void bind_program(py::module_& m) {
  py::class_<ProgramPlan, std::shared_ptr<ProgramPlan>>(m, "ProgramPlanCore")
      .def_readonly("name", &ProgramPlan::name)
      .def_readonly("shared_bytes", &ProgramPlan::shared_bytes)
      .def_readonly("peak_register_slots", &ProgramPlan::peak_register_slots)
      .def_readonly("peak_registers", &ProgramPlan::peak_registers)
      .def_property_readonly("register_budget", &ProgramPlan::register_budget)
      .def_readonly("staging", &ProgramPlan::staging)
      .def_property_readonly("staging_trace", [](const ProgramPlan& p) {
        py::list out;
        for (const StagingVerdict& v : p.staging_trace) {
          py::dict d;
          d["name"] = v.name;
          d["accepted"] = v.accepted;
          d["reasons"] = v.reasons;
          out.append(d);
        }
        return out;
      })
      .def_property_readonly("scope_trace", [](const ProgramPlan& p) {
        py::list out;
        for (const ScopeVerdict& v : p.scope_trace) {
          py::dict d;
          d["scope"] = v.scope;
          d["staging"] = v.staging;
          d["accepted"] = v.accepted;
          d["chosen"] = v.chosen;
          d["ns_per_row"] = v.accepted ? py::object(py::float_(v.ns_per_row)) : py::object(py::none());
          d["reasons"] = v.reasons;
          out.append(d);
        }
        return out;
      })
      .def_property_readonly("rows", [](const ProgramPlan& p) -> py::object {
        if (!p.rows) return py::none();
        py::dict d;
        d["shape"] = py::tuple(py::cast(p.rows->shape));
        d["slots"] = p.rows->slots;
        d["chunks"] = p.rows->chunks();
        d["chunk_slots"] = p.rows->chunk_slots;
        d["chunk_elements"] = p.rows->chunk_elements();
        return std::move(d);
      })
      .def_readonly("outputs", &ProgramPlan::outputs)
      .def_property_readonly("scope", [](const ProgramPlan& p) { return p.scope.str(); })
      .def_property_readonly("backend", [](const ProgramPlan& p) { return p.context.backend; })
      .def_property_readonly("target", [](const ProgramPlan& p) { return p.context.target; })
      .def_property_readonly("values", [](const ProgramPlan& p) {
        py::list out;
        for (const ProgramValue& v : p.values) out.append(value_dict(v));
        return out;
      })
      .def_property_readonly("steps", [](const ProgramPlan& p) {
        py::list out;
        for (const ProgramStep& s : p.steps) out.append(step_dict(s));
        return out;
      })
      .def_property_readonly("step_plans", [](const ProgramPlan& p) {
        py::list out;
        for (const ProgramStep& s : p.steps) out.append(std::const_pointer_cast<Plan>(s.bound->shared_plan()));
        return out;
      })
      .def("scope_trace_str", &ProgramPlan::scope_trace_str)
      .def("__str__", &ProgramPlan::str);

  py::class_<BoundProgram, std::shared_ptr<BoundProgram>>(m, "BoundProgram")
      .def_property_readonly("plan",
                             [](const BoundProgram& b) { return std::const_pointer_cast<ProgramPlan>(b.shared_plan()); })
      .def("describe",
           [](const BoundProgram& b) {
             py::dict d;
             for (const auto& [k, v] : b.runner().describe()) d[py::str(k)] = v;
             return d;
           })
      .def(
          "run_host",
          [](const BoundProgram& b, const py::list& inputs, std::vector<double> scalars, const py::list& outputs,
             long long tiles) {
            ProgramArgs args;
            args.inputs = host_addresses(inputs, "inputs");
            args.scalars = std::move(scalars);
            args.outputs = host_addresses(outputs, "outputs");
            args.tiles = tiles;
            run_host(b, args);
          },
          py::arg("inputs"), py::arg("scalars"), py::arg("outputs"), py::arg("tiles"),
          "Runs on NumPy arrays with the GIL released: inputs [tiles][tile] (one tile where the batch shares it), the "
          "call's run-time scalars, outputs [tiles][tile] (read first where a step accumulates), written.")
      .def(
          "run_host_one",
          [](const BoundProgram& b, const py::handle& input, const py::handle& output, long long tiles) {
            ProgramArgs args;
            args.inputs = {host_address(input, "inputs")};
            args.outputs = {host_address(output, "outputs")};
            args.tiles = tiles;
            run_host(b, args);
          },
          "run_host for one array in and one out, no scalars: a repeated small call converts no lists.")
      .def(
          "run_device",
          [](const BoundProgram& b, std::vector<std::uintptr_t> inputs, std::vector<double> scalars,
             std::vector<std::uintptr_t> outputs, long long tiles, int device, std::uintptr_t stream) {
            ProgramArgs args;
            args.inputs = std::move(inputs);
            args.scalars = std::move(scalars);
            args.outputs = std::move(outputs);
            args.tiles = tiles;
            args.device = device;
            args.stream = stream;
            b.runner().run(args);
          },
          py::arg("inputs"), py::arg("scalars"), py::arg("outputs"), py::arg("tiles"), py::arg("device"),
          py::arg("stream"), "Launches on device pointers, ordered on `stream` of `device` (the GIL kept, as PyTorch does).")
      .def(
          "run_device_one",
          [](const BoundProgram& b, std::uintptr_t input, std::uintptr_t output, long long tiles, int device,
             std::uintptr_t stream) {
            ProgramArgs args;
            args.inputs = {input};
            args.outputs = {output};
            args.tiles = tiles;
            args.device = device;
            args.stream = stream;
            b.runner().run(args);
          },
          "run_device for one array in and one out, no scalars: a repeated small call's launch converts no lists.");

  m.def("staging_names", &staging_names, "How a program's kernel may hold its rows, in priority order.");
  m.def("broadcast_shapes", &broadcast_shapes, py::arg("shapes"), py::arg("where"), py::arg("op"),
        "A map's result shape: its operands' tile shapes broadcast as NumPy does (ValueError naming where and op).");
  m.def(
      "reduced_shape",
      [](const std::vector<long long>& shape, std::vector<int> axes, bool keepdims, const std::string& where) {
        std::vector<long long> out = reduced_shape(shape, axes, keepdims, where);
        return py::make_tuple(py::tuple(py::cast(out)), axes);
      },
      py::arg("shape"), py::arg("axes"), py::arg("keepdims"), py::arg("where"),
      "A reduction's result shape (NumPy's keepdims; () where every dim is reduced) and its axes normalised.");
  m.def(
      "plan_program",
      [](const std::string& name, const py::list& inputs, const py::list& steps, const std::vector<int>& outputs,
         const std::string& scope, int threads, const std::string& storage, const std::string& staging,
         const std::string& target, const std::string& backend, const std::vector<int>& devices, bool fastmath,
         int ctas, long long folded_tiles, const std::vector<int>& folded) {
        ProgramSpec spec;
        spec.name = name;
        spec.auto_scope = scope.empty();  // named nowhere: the planner's choice
        spec.scope = spec.auto_scope ? ExecScope::thread() : ExecScope::named(scope, threads, ctas);
        spec.storage = storage;
        spec.staging = staging;
        spec.fastmath = fastmath;
        for (const py::handle& h : inputs) {
          const py::tuple t = py::reinterpret_borrow<py::tuple>(h);
          ProgramInput in;
          in.name = t[0].cast<std::string>();
          in.dtype = dtype_from_name(t[1].cast<std::string>(), in.name);
          in.shape = t[2].cast<std::vector<long long>>();
          in.batch_broadcast = t[3].cast<bool>();
          spec.inputs.push_back(in);
        }
        for (const py::handle& h : steps) {
          spec.steps.push_back(step_of(py::reinterpret_borrow<py::dict>(h)));
          for (int k : spec.steps.back().scalar_args) spec.scalar_args = std::max(spec.scalar_args, k + 1);
        }
        spec.outputs = outputs;
        std::shared_ptr<const ProgramPlan> plan = plan_program(spec, make_context(target, backend, devices));
        if (!folded.empty()) plan = with_folded_outputs(*plan, folded_tiles, folded);
        return std::make_shared<BoundProgram>(plan);
      },
      py::arg("name"), py::arg("inputs"), py::arg("steps"), py::arg("outputs"), py::arg("scope"), py::arg("threads"),
      py::arg("storage"), py::arg("staging"), py::arg("target"), py::arg("backend"), py::arg("devices") = std::vector<int>{},
      py::arg("fastmath") = false, py::arg("ctas") = 1, py::arg("folded_tiles") = 0, py::arg("folded") = std::vector<int>{},
      "Plans a traced program (scope '': named nowhere, the planner chooses it): each step through the registry, copies where placements differ, shared memory "
      "by live range; its runner binds on the first run.");
  m.def(
      "prepare_call",
      [](const OpCall& call, const std::string& target, const std::string& backend, const std::vector<int>& devices,
         bool auto_scope, bool storage_given, const std::string& scope_only, const std::string& staging) {
        ProgramSpec spec = call_program(call);
        spec.auto_scope = auto_scope;
        spec.auto_scope_only = scope_only;
        spec.staging = staging;
        spec.steps.front().storage_given = storage_given;
        return std::make_shared<BoundProgram>(plan_program(spec, make_context(target, backend, devices)));
      },
      py::arg("call"), py::arg("target"), py::arg("backend"), py::arg("devices") = std::vector<int>{},
      py::arg("auto_scope") = false, py::arg("storage_given") = true, py::arg("scope_only") = "",
      py::arg("staging") = "",
      "A standalone call as the program of one step, planned as it is called; its runner binds on the first run. "
      "auto_scope: no scope was named (a batched call): the planner chooses it, and the storage too unless "
      "storage_given; scope_only and staging: only that point of its candidates (autotuning's).");
}

}  // namespace tp
