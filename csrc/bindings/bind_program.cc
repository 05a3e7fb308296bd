// tileprim._C's tile programs: the traced steps in, a ProgramPlan out, and its host run.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "backends/cpu/program_runner.h"
#include "bindings/bindings.h"
#include "errors.h"
#include "program/program_plan.h"

namespace py = pybind11;

namespace tp {

namespace {

ConfigValue config_of(const std::string& key, const py::handle& v) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>();
  if (py::isinstance<py::int_>(v)) return v.cast<long long>();
  if (py::isinstance<py::float_>(v)) return v.cast<double>();
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  throw TypeError(key + ": expected True or False, not " + std::string(py::str(py::repr(v))));
}

StepSpec step_of(const py::dict& d) {
  StepSpec s;
  s.op = d["op"].cast<std::string>();
  s.operands = d["operands"].cast<std::vector<int>>();
  s.scalars = d["scalars"].cast<std::vector<double>>();
  s.axes = d["axes"].cast<std::vector<int>>();
  s.keepdims = d["keepdims"].cast<bool>();
  s.dtype = d["dtype"].cast<std::string>();
  s.storage = d["storage"].cast<std::string>();
  s.layout = d["layout"].cast<std::optional<TileLayout>>();
  s.out_layout = d["out_layout"].cast<std::optional<TileLayout>>();
  s.dispatch = d["dispatch"].cast<std::string>();
  for (const auto& [k, v] : d["config"].cast<py::dict>()) {
    const std::string key = py::str(k);
    s.config[key] = config_of(key, v);
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
  d["result"] = s.result;
  d["where"] = s.where;
  d["inserted"] = s.inserted;
  d["reasons"] = s.reasons;
  d["sync_before"] = s.sync_before;
  return d;
}


}  // namespace

std::vector<std::uintptr_t> host_addresses(const py::list& arrays, const char* what) {
  std::vector<std::uintptr_t> out;
  for (const py::handle& a : arrays) {
    if (!py::isinstance<py::array>(a)) throw TypeError(std::string(what) + ": expected NumPy arrays");
    auto arr = py::reinterpret_borrow<py::array>(a);
    if (!(arr.flags() & py::array::c_style)) throw ValueError(std::string(what) + ": expected C-contiguous arrays");
    out.push_back(reinterpret_cast<std::uintptr_t>(arr.data()));
  }
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
      .def(
          "run_host",
          [](const ProgramPlan& p, const py::list& inputs, const std::vector<double>& scalars, const py::list& outputs,
             long long tiles) {
            if (p.context.backend != "cpu") throw ValueError("backend: run_host runs programs planned for the cpu");
            const std::vector<std::uintptr_t> in = host_addresses(inputs, "inputs");
            const std::vector<std::uintptr_t> out = host_addresses(outputs, "outputs");
            auto interrupted = [] {
              py::gil_scoped_acquire gil;
              return PyErr_CheckSignals() != 0;
            };
            try {
              py::gil_scoped_release release;
              run_program_host(p, in, scalars, out, tiles, interrupted);
            } catch (const Interrupted&) {
              throw py::error_already_set();
            }
          },
          py::arg("inputs"), py::arg("scalars"), py::arg("outputs"), py::arg("tiles"),
          "Runs the program on NumPy arrays: inputs [tiles][tile] (one tile where batch-broadcast), the call's "
          "run-time scalars, outputs [tiles][tile], written.")
      .def("__str__", &ProgramPlan::str);

  m.def("staging_names", &staging_names, "How a program's kernel may hold its rows, in priority order.");
  m.def(
      "plan_program",
      [](const std::string& name, const py::list& inputs, const py::list& steps, const std::vector<int>& outputs,
         const std::string& scope, int threads, const std::string& storage, const std::string& staging,
         const std::string& target, const std::string& backend, const std::vector<int>& devices) {
        ProgramSpec spec;
        spec.name = name;
        spec.scope = ExecScope::named(scope, threads);
        spec.storage = storage;
        spec.staging = staging;
        for (const py::handle& h : inputs) {
          const py::tuple t = py::reinterpret_borrow<py::tuple>(h);
          ProgramInput in;
          in.name = t[0].cast<std::string>();
          in.dtype = dtype_from_name(t[1].cast<std::string>(), in.name);
          in.shape = t[2].cast<std::vector<long long>>();
          in.batch_broadcast = t[3].cast<bool>();
          spec.inputs.push_back(in);
        }
        for (const py::handle& h : steps) spec.steps.push_back(step_of(py::reinterpret_borrow<py::dict>(h)));
        spec.outputs = outputs;
        return std::const_pointer_cast<ProgramPlan>(plan_program(spec, make_context(target, backend, devices)));
      },
      py::arg("name"), py::arg("inputs"), py::arg("steps"), py::arg("outputs"), py::arg("scope"), py::arg("threads"),
      py::arg("storage"), py::arg("staging"), py::arg("target"), py::arg("backend"), py::arg("devices") = std::vector<int>{},
      "Plans a traced program: each step through the registry, copies where placements differ, shared memory "
      "by live range.");
}

}  // namespace tp
