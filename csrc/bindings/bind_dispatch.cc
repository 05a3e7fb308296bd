#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "dispatch/registry.h"
#include "dispatch/validate.h"
#include "errors.h"

namespace py = pybind11;

namespace tp {

namespace {

ExecScope scope_from(const std::string& kind, int threads) {
  if (kind == "thread") return ExecScope::thread();
  if (kind == "warp") return ExecScope::warp();
  if (kind == "warpgroup") return ExecScope::warpgroup();
  if (kind == "cta") return ExecScope::cta(threads);
  throw ValueError("scope: unknown exec scope '" + kind + "'; use thread, warp, warpgroup or cta(threads)");
}

ConfigValue config_value(const std::string& key, const py::handle& v) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>();
  if (py::isinstance<py::int_>(v)) return v.cast<long long>();
  if (py::isinstance<py::float_>(v)) return v.cast<double>();
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  throw TypeError(key + ": a config option is a bool, int, float or str, not " +
                  std::string(py::str(v.get_type().attr("__name__"))));
}

py::object param_object(const ParamValue& v) {
  return std::visit([](const auto& x) -> py::object { return py::cast(x); }, v);
}

}  // namespace

void bind_dispatch(py::module_& m) {
  py::class_<TileRef>(m, "TileRef")
      .def(py::init([](const std::string& arg, const std::string& dtype, std::vector<long long> shape,
                       const std::string& storage, std::optional<TileLayout> layout) {
             TileRef t;
             t.arg = arg;
             t.dtype = dtype_from_name(dtype, arg);
             t.shape = std::move(shape);
             t.storage = storage_from_name(storage);
             t.layout = std::move(layout);
             return t;
           }),
           py::arg("arg"), py::arg("dtype"), py::arg("shape"), py::arg("storage"), py::arg("layout") = py::none())
      .def_static("scalar", [](const std::string& arg, double value) {
        TileRef t;
        t.arg = arg;
        t.scalar = true;
        t.value = value;
        return t;
      })
      .def_property_readonly("dtype", [](const TileRef& t) { return std::string(dtype_name(t.dtype)); })
      .def_readonly("shape", &TileRef::shape)
      .def_readonly("layout", &TileRef::layout)
      .def_property_readonly("storage", [](const TileRef& t) { return std::string(storage_name(t.storage)); })
      .def("__str__", &TileRef::str);

  py::class_<OpCall>(m, "OpCall")
      .def(py::init([](const std::string& op, std::vector<TileRef> inputs, TileRef output, const std::string& scope,
                       int threads, std::vector<int> axes, bool accum, const py::dict& config,
                       const std::string& dispatch) {
             op_info(op);
             OpCall c;
             c.op = op;
             c.inputs = std::move(inputs);
             c.output = std::move(output);
             c.scope = scope_from(scope, threads);
             c.axes = std::move(axes);
             c.accum = accum;
             for (const auto& [k, v] : config) {
               const std::string key = py::str(k);
               c.config[key] = config_value(key, v);
             }
             c.dispatch = dispatch;
             return c;
           }),
           py::arg("op"), py::arg("inputs"), py::arg("output"), py::arg("scope"), py::arg("threads"),
           py::arg("axes"), py::arg("accum"), py::arg("config"), py::arg("dispatch"))
      .def_readonly("op", &OpCall::op)
      .def_readonly("inputs", &OpCall::inputs)
      .def_readonly("output", &OpCall::output)
      .def_readonly("axes", &OpCall::axes)
      .def_readonly("accum", &OpCall::accum)
      .def_property_readonly("scope", [](const OpCall& c) { return c.scope.str(); })
      .def_property_readonly("threads", [](const OpCall& c) { return c.scope.threads; })
      .def("__str__", &OpCall::str);

  py::class_<TraceEntry>(m, "TraceEntry")
      .def_readonly("variant", &TraceEntry::variant)
      .def_readonly("priority", &TraceEntry::priority)
      .def_readonly("status", &TraceEntry::status)
      .def_readonly("reasons", &TraceEntry::reasons)
      .def("__repr__", [](const TraceEntry& e) {
        std::string r = "TraceEntry(variant='" + e.variant + "', priority=" + std::to_string(e.priority) +
                        ", status='" + e.status + "', reasons=[";
        for (size_t i = 0; i < e.reasons.size(); ++i) r += (i ? ", '" : "'") + e.reasons[i] + "'";
        return r + "])";
      });

  py::class_<Plan>(m, "PlanCore")
      .def_readonly("variant", &Plan::variant)
      .def_readonly("priority", &Plan::priority)
      .def_readonly("trace", &Plan::trace)
      .def_readonly("call", &Plan::call)
      .def_property_readonly("target", [](const Plan& p) { return p.context.target; })
      .def_property_readonly("sm_version", [](const Plan& p) { return p.context.sm_version; })
      .def_property_readonly("params", [](const Plan& p) {
        py::dict d;
        for (const auto& [k, v] : p.params) d[py::str(k)] = param_object(v);
        return d;
      })
      .def_property_readonly("numerics", [](const Plan& p) {
        py::dict d;
        for (const auto& [k, v] : p.numerics) d[py::str(k)] = v;
        return d;
      })
      .def("__str__", &Plan::str);

  m.def(
      "plan",
      [](OpCall call, const std::string& target) {
        validate_call(call);
        return Registry::instance().choose(call, DispatchContext::for_target(target));
      },
      py::arg("call"), py::arg("target"));

  m.def("variants", [](const std::string& op) {
    py::list out;
    for (const Variant* v : Registry::instance().variants_for(op)) {
      std::vector<std::string> preds;
      for (const Predicate& p : v->predicates()) preds.push_back(p.name);
      out.append(py::make_tuple(v->name(), v->priority(), preds));
    }
    return out;
  });
  m.def("ops", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const OpInfo& i : all_ops()) {
      out.emplace_back(i.name, i.family == OpFamily::reduction ? "reduction" : "elementwise");
    }
    return out;
  });
}

}  // namespace tp
