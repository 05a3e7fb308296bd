// tileprim._C's dispatch layer: the op table, calls and plans, and the bound plans Python
// runs (the call-shape cache lives behind prepare()).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdlib>

#include "backends/cuda/driver.h"
#include "bindings/bindings.h"
#include "dispatch/architecture.h"
#include "dispatch/plan_cache.h"
#include "dispatch/registry.h"
#include "errors.h"

namespace py = pybind11;

namespace tp {

ConfigValue config_value(const std::string& key, const py::handle& v) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>();
  if (py::isinstance<py::int_>(v)) return v.cast<long long>();
  if (py::isinstance<py::float_>(v)) return v.cast<double>();
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  throw TypeError(key + ": expected True or False, not " + std::string(py::str(py::repr(v))));
}

namespace {

py::object param_object(const ParamValue& v) {
  return std::visit([](const auto& x) -> py::object { return py::cast(x); }, v);
}

std::vector<std::string> dtype_names(const std::vector<DType>& ts) {
  std::vector<std::string> out;
  for (DType t : ts) out.push_back(dtype_name(t));
  return out;
}

py::dict op_dict(const OpDef& d) {
  py::dict out;
  out["name"] = d.name;
  out["family"] = family_name(d.family);
  out["operands"] = d.operands;
  out["extra_arg"] = d.extra_arg;
  out["dtypes"] = dtype_names(d.dtypes);
  out["nan_rule"] = nan_rule_text(d.nan_rule);
  out["exactly_rounded"] = dtype_names(d.exactly_rounded);
  out["same_bits"] = dtype_names(d.same_bits);
  py::dict max_ulp;
  for (const auto& [dtype, ulp] : d.max_ulp) max_ulp[py::str(dtype_name(dtype))] = ulp;
  out["max_ulp"] = max_ulp;
  out["options"] = d.options;
  out["device_fn"] = d.device_fn;
  out["device_fn_nan"] = d.device_fn_nan;
  py::object fast = py::none();  // fastmath=True: the GPU's approximation, where the op has one
  if (!d.device_fn_fast.empty()) {
    py::dict f;
    f["device_fn"] = d.device_fn_fast;
    f["form"] = d.fast_form;
    std::vector<DType> approximated;
    for (DType t : d.dtypes) {
      if (d.approximated(true, t)) approximated.push_back(t);
    }
    f["dtypes"] = dtype_names(approximated);
    fast = f;
  }
  out["fastmath"] = fast;
  out["doc"] = d.doc;
  return out;
}


void run_released(const BoundPlan& bound, RunArgs& args) {
  run_released(args, [&](const RunArgs& a) { bound.runner().run(a); });
}

std::uintptr_t address_of(const py::handle& a) {
  if (!py::isinstance<py::array>(a)) throw TypeError("run_host: operands are NumPy arrays");
  return reinterpret_cast<std::uintptr_t>(py::reinterpret_borrow<py::array>(a).data());
}

}  // namespace

// The context dispatch sees: the target, the backend and, on CUDA, which devices reach which.
DispatchContext make_context(const std::string& target, const std::string& backend, const std::vector<int>& devices) {
  DispatchContext ctx;
  ctx.sm_version = sm_version(target);
  ctx.target = target;
  if (backend != "cpu" && backend != "cuda") throw ValueError("backend: '" + backend + "' is not 'cpu' or 'cuda'");
  ctx.backend = backend;
  ctx.devices = devices;
  if (backend == "cuda") {
    cuda::Driver& driver = cuda::Driver::get();
    for (int d : devices.empty() ? std::vector<int>{0} : devices) {
      ctx.device_targets.push_back(sm_target(driver.compute_capability(d)));
    }
  }
  if (backend == "cuda" && !devices.empty()) {
    cuda::Driver& driver = cuda::Driver::get();
    ctx.multiprocessors = driver.multiprocessors(devices[0]);
    const bool no_peers = std::getenv("TILEPRIM_NO_PEER_ACCESS") != nullptr;  // tests the staged path
    for (int a : devices) {
      ctx.multiprocessors = std::min(ctx.multiprocessors, driver.multiprocessors(a));
      std::vector<bool> row;
      for (int b : devices) row.push_back(a == b || (!no_peers && driver.can_access_peer(a, b)));
      ctx.peer.push_back(row);
    }
  }
  return ctx;
}

void bind_dispatch(py::module_& m) {
  m.attr("DEFAULT_TIMEOUT_S") = kDefaultTimeoutS;
  m.def("ops", [] {
    py::list out;
    for (const OpDef& d : op_table()) out.append(op_dict(d));
    return out;
  });
  m.def("variants", [](const std::string& op) {
    py::list out;
    for (const Variant* v : Registry::instance().variants_for(op)) {
      std::vector<std::string> preds;
      for (const Predicate& p : v->predicates()) preds.push_back(p.name);
      out.append(py::make_tuple(v->name(), v->priority(), preds));
    }
    return out;
  });
  m.def("known_targets", &known_targets);
  m.def(
      "storage_names",
      [] {
        std::vector<std::string> names;
        for (Storage s : storages()) names.push_back(storage_name(s));
        return names;
      },
      "Every storage scope a tile may be staged in: local, shared, shared.dyn, global.");
  m.def(
      "target_limits",
      [](const std::string& target) {
        const SmLimits l = target_limits(target);
        py::dict d;
        d["registers_per_thread"] = l.registers_per_thread;
        d["registers_per_block"] = l.registers_per_block;
        d["shared_per_block"] = l.shared_per_block;
        d["spill_slots"] = l.spill_slots;
        d["sm_registers"] = l.registers;
        d["sm_threads"] = l.threads;
        d["sm_blocks"] = l.blocks;
        d["sm_shared"] = l.shared;
        return d;
      },
      py::arg("target"), "The limits a plan for target is checked against ('': before a target is known).");
  m.def("sm_version", &sm_version, py::arg("target"), "'sm_90a' -> 90 ('compute_90' -> 90, '' -> 0).");
  m.def("sm_target", &sm_target, py::arg("cc"), "The target of a device of compute capability cc: 90 -> 'sm_90a'.");

  py::class_<TileRef>(m, "TileRef")
      .def(py::init([](const std::string& arg, const std::string& dtype, std::vector<long long> shape,
                       const std::string& storage, std::optional<TileLayout> layout, int device,
                       std::vector<long long> strides) {
             TileRef t;
             t.arg = arg;
             t.dtype = dtype_from_name(dtype, arg);
             t.shape = std::move(shape);
             t.storage = storage_from_name(storage);
             t.layout = std::move(layout);
             t.device = device;
             t.strides = std::move(strides);
             return t;
           }),
           py::arg("arg"), py::arg("dtype"), py::arg("shape"), py::arg("storage"), py::arg("layout") = py::none(),
           py::arg("device") = -1, py::arg("strides") = std::vector<long long>{})
      .def_static("scalar",
                  [](const std::string& arg) {
                    TileRef t;
                    t.arg = arg;
                    t.scalar = true;
                    return t;
                  })
      .def_property_readonly("dtype", [](const TileRef& t) { return std::string(dtype_name(t.dtype)); })
      .def_readonly("shape", &TileRef::shape)
      .def_readonly("layout", &TileRef::layout)
      .def_readonly("is_scalar", &TileRef::scalar)
      .def_property_readonly("storage", [](const TileRef& t) { return std::string(storage_name(t.storage)); })
      .def("__str__", &TileRef::str);

  py::class_<OpCall>(m, "OpCall")
      .def(py::init([](const std::string& op, std::vector<TileRef> inputs, TileRef output, const std::string& scope,
                       int threads, std::vector<int> axes, bool accum, const py::dict& config,
                       const std::string& dispatch, int ctas) {
             OpCall c;
             c.def = &op_def(op);
             c.inputs = std::move(inputs);
             c.output = std::move(output);
             c.scope = ExecScope::named(scope, threads, ctas);
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
           py::arg("axes"), py::arg("accum"), py::arg("config"), py::arg("dispatch"), py::arg("ctas") = 1)
      .def_property_readonly("op", &OpCall::op)
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

  py::class_<Plan, std::shared_ptr<Plan>>(m, "PlanCore")
      .def_readonly("variant", &Plan::variant)
      .def_readonly("priority", &Plan::priority)
      .def_readonly("trace", &Plan::trace)
      .def_readonly("call", &Plan::call)
      .def_property_readonly("target", [](const Plan& p) { return p.context.target; })
      .def_property_readonly("sm_version", [](const Plan& p) { return p.context.sm_version; })
      .def_property_readonly("backend", [](const Plan& p) { return p.context.backend; })
      .def_property_readonly("devices", [](const Plan& p) { return p.context.devices; })
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

  py::class_<BoundPlan, std::shared_ptr<BoundPlan>>(m, "BoundPlan")
      .def_property_readonly("plan", [](const BoundPlan& b) { return std::const_pointer_cast<Plan>(b.shared_plan()); })
      .def("describe",
           [](const BoundPlan& b) {
             py::dict d;
             for (const auto& [k, v] : b.runner().describe()) d[py::str(k)] = v;
             return d;
           })
      .def(
          "run_host",
          [](const BoundPlan& b, const py::list& inputs, const std::vector<double>& scalars, const py::array& output,
             long long tiles) {
            RunArgs args;
            for (const py::handle& a : inputs) args.inputs.push_back(TensorArg{a.is_none() ? 0 : address_of(a), {}, -1});
            args.scalars = scalars;
            args.output.data = reinterpret_cast<std::uintptr_t>(output.data());
            args.tiles = tiles;
            run_released(b, args);
          },
          py::arg("inputs"), py::arg("scalars"), py::arg("output"), py::arg("tiles"),
          "Runs on NumPy arrays (C-contiguous, [tiles][tile]); output is written, and read when accumulating.")
      .def(
          "run_collective",
          [](const BoundPlan& b, const std::vector<std::uintptr_t>& inputs, const std::vector<int>& devices,
             std::uintptr_t output, int output_device, const std::vector<std::uintptr_t>& streams,
             const std::vector<std::uintptr_t>& signal_pads, unsigned long long epoch, double timeout,
             std::uintptr_t abandoned, int self_rank) {
            RunArgs args;
            for (size_t r = 0; r < inputs.size(); ++r) args.inputs.push_back(TensorArg{inputs[r], {}, devices[r]});
            args.output = TensorArg{output, {}, output_device};
            args.streams = streams;
            args.signal_pads = signal_pads;
            args.epoch = epoch;
            args.timeout_s = timeout;
            args.abandoned = abandoned;
            args.self_rank = self_rank;
            if (output_device >= 0) {
              b.runner().run(args);  // launches only: the GIL is kept, as for run_device
            } else {
              run_released(b, args);
            }
          },
          py::arg("inputs"), py::arg("devices"), py::arg("output"), py::arg("output_device"), py::arg("streams"),
          py::arg("signal_pads") = std::vector<std::uintptr_t>{}, py::arg("epoch") = 0,
          py::arg("timeout") = kDefaultTimeoutS, py::arg("abandoned") = 0,
          py::arg("self_rank") = -1,
          "Runs a collective on every rank's tensor (host addresses, or device pointers with each rank's "
          "stream); strides are the plan's. With signal_pads (every rank's), the ranks are other processes "
          "(CUDA IPC) and only rank `self_rank`'s part runs here (its share of the work, or its wait for the "
          "workers), which stops waiting once the host flag at `abandoned` reaches `epoch`. A GPU waiting "
          "longer than `timeout` seconds for another rank traps.");

  m.def(
      "prepare",
      [](const OpCall& call, const std::string& target, const std::string& backend, const std::vector<int>& devices) {
        return std::const_pointer_cast<BoundPlan>(
            PlanCache::instance().get(call, make_context(target, backend, devices)));
      },
      py::arg("call"), py::arg("target"), py::arg("backend"), py::arg("devices") = std::vector<int>{},
      "The call's bound plan (the call-shape cache): validated, dispatched and cached by call signature; a "
      "collective runs it, a tile op's step runs inside a program (prepare_call).");
  m.def("plan_cache_size", [] { return PlanCache::instance().size(); });
  m.def("plan_cache_clear", [] { PlanCache::instance().clear(); });
}

}  // namespace tp
