#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "layout/exec_scope.h"
#include "layout/placement.h"
#include "layout/tile_layout.h"

namespace py = pybind11;

namespace tp {

namespace {

py::dict position_dict(const Position& p) {
  py::dict d;
  for (const auto& [axis, value] : p) d[axis_name(axis)] = value;
  return d;
}

std::map<Axis, long long> offsets_from(const std::map<std::string, long long>& named) {
  std::map<Axis, long long> out;
  for (const auto& [name, value] : named) out[axis_from_name(name)] += value;
  return out;
}

}  // namespace

void bind_layout(py::module_& m) {
  py::class_<Iter>(m, "Iter",
                   "One dim of a layout: extent (how many), stride (how far apart) and axis (m for memory, or a "
                   "thread axis: laneid, warpid, tx, ...), as S[(extent, ...) : (stride @ axis, ...)] writes it.\n\n"
                   "Examples\n--------\n>>> tp.Iter(32, 1, 'laneid')\nIter(32, 1, 'laneid')\n"
                   ">>> TileLayout.from_iters([tp.Iter(4, 8), tp.Iter(8, 1)])\nTileLayout(S[(4, 8) : (8, 1)])\n")
      // Python's rule for layout numbers (any __index__ but bool, within int64) converts extent
      // and stride, and the axis is named by str(), so a bad argument raises an error naming it
      // rather than a signature mismatch.
      .def(py::init([](const py::object& extent, const py::object& stride, const py::object& axis) {
             const py::object as_int = py::module_::import("tileprim._layout.syntax").attr("layout_int");
             return Iter{as_int(extent, "extent").cast<long long>(),
                         as_int(stride, "stride").cast<long long>(), axis_from_name(py::str(axis))};
           }),
           py::arg("extent"), py::arg("stride"), py::arg("axis") = "m")
      .def_readonly("extent", &Iter::extent)
      .def_readonly("stride", &Iter::stride)
      .def_property_readonly("axis", [](const Iter& it) { return std::string(axis_name(it.axis)); })
      .def("__eq__", [](const Iter& a, const Iter& b) { return a == b; })
      .def("__hash__", [](const Iter& it) { return py::hash(py::make_tuple(it.extent, it.stride, axis_name(it.axis))); })
      .def("__repr__", [](const Iter& it) {
        return "Iter(" + std::to_string(it.extent) + ", " + std::to_string(it.stride) + ", '" + axis_name(it.axis) + "')";
      })
      .def("__reduce__", [](const py::object& self) {  // a value: pickled, copied, sent to workers as its parts
        const Iter& it = self.cast<const Iter&>();
        return py::make_tuple(self.get_type(), py::make_tuple(it.extent, it.stride, std::string(axis_name(it.axis))));
      });

  py::class_<DimIters>(m, "DimIters")
      .def_readonly("iters", &DimIters::iters)
      .def_readonly("thread_extent", &DimIters::thread_extent)
      .def_readonly("local_extent", &DimIters::local_extent)
      .def("__repr__", [](const DimIters& d) {
        return "DimIters(thread_extent=" + std::to_string(d.thread_extent) +
               ", local_extent=" + std::to_string(d.local_extent) + ")";
      });

  py::class_<TileLayout>(m, "TileLayoutCore")
      .def(py::init([](std::vector<Iter> shard, std::vector<Iter> replica,
                       const std::map<std::string, long long>& offset, std::tuple<int, int, int> swizzle) {
             return TileLayout(std::move(shard), std::move(replica), offsets_from(offset),
                               Swizzle{std::get<0>(swizzle), std::get<1>(swizzle), std::get<2>(swizzle)});
           }),
           py::arg("shard"), py::arg("replica"), py::arg("offset"), py::arg("swizzle"))
      .def_static("row_major", &TileLayout::row_major)
      .def_property_readonly("shard", &TileLayout::shard)
      .def_property_readonly("replica", &TileLayout::replica)
      .def_property_readonly("offset", [](const TileLayout& L) {
        std::map<std::string, long long> out;
        for (const auto& [axis, value] : L.offset()) out[axis_name(axis)] = value;
        return out;
      })
      .def_property_readonly("swizzle", [](const TileLayout& L) {
        return std::make_tuple(L.swizzle().per_element, L.swizzle().swizzle_len, L.swizzle().atom_len);
      })
      .def_property_readonly("swizzled", &TileLayout::swizzled)
      .def_property_readonly("size", &TileLayout::size)
      .def_property_readonly("elements", &TileLayout::elements)
      .def_property_readonly("shape", &TileLayout::shape)
      .def_property_readonly("span", &TileLayout::span)
      .def_property_readonly("thread_axes", [](const TileLayout& L) {
        std::vector<std::string> names;
        for (Axis a : L.thread_axes()) names.push_back(axis_name(a));
        return names;
      })
      .def("storage", &TileLayout::storage)
      .def("positions", [](const TileLayout& L, long long flat) {
        py::list out;
        for (const Position& p : L.positions(flat)) out.append(position_dict(p));
        return out;
      })
      .def("group", &TileLayout::group)
      .def("padded_to", &TileLayout::padded_to)
      .def("placement", [](const TileLayout& L, const std::string& scope, int threads) {
        const std::shared_ptr<const RegisterPlacement> p = place_in_registers(L, ExecScope::named(scope, threads), "layout");
        return py::make_tuple(p->threads, p->slots, p->load, p->store);
      })
      .def("run_form", [](const TileLayout& L, const std::string& scope, int threads) {
        const RunForm f = place_in_registers(L, ExecScope::named(scope, threads), "layout")->run;
        return py::make_tuple(f.owners, f.vec, f.padded_elements);
      })
      .def("__eq__", [](const TileLayout& a, const TileLayout& b) { return a == b; })
      .def("__hash__", &TileLayout::hash)
      .def("__str__", &TileLayout::str);

  m.def("axis_names", [] {
    std::vector<std::string> names;
    for (Axis a : all_axes()) names.push_back(axis_name(a));
    return names;
  });
  m.def("thread_weight", [](const std::string& axis) { return thread_weight(axis_from_name(axis)); });
  m.def("check_swizzle", &check_swizzle, py::arg("per_element"), py::arg("swizzle_len"), py::arg("atom_len"));
  m.def(
      "scope_threads",
      [] {
        py::dict d;
        for (ScopeKind k : ExecScope::kinds()) {
          const int fixed = ExecScope::fixed_threads(k);
          const bool cluster = k == ScopeKind::cluster;  // lanes: 2 CTAs of a warp .. 16 of 1024 threads
          const int fewest = fixed > 0 ? fixed : cluster ? 2 * 32 : 1;
          const int most = fixed > 0 ? fixed : ExecScope::kMaxCtaThreads * (cluster ? ExecScope::kMaxClusterCtas : 1);
          d[py::str(ExecScope{k, fewest}.kind_name())] = py::make_tuple(fewest, most);
        }
        return d;
      },
      "Each exec scope kind's thread count as (fewest, most): thread (1, 1), ..., cta (1, 1024), cluster (64, 16384).");
}

}  // namespace tp
