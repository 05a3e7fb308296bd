// tileprim._C.RepeatedCollective: a collective's repeated calls on device arrays, read, matched,
// checked and launched in C++ (DESIGN.md §4: a repeated call is a lookup and a launch). Python
// keeps one per set of options and array type; a call it cannot match returns None and takes
// the checking path, which then remembers the call's signature here.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <vector>

#include "bindings/bindings.h"
#include "bindings/dlpack_exchange.h"
#include "dispatch/plan_cache.h"
#include "errors.h"
#include "variants/comm/dst_overlap.h"

namespace py = pybind11;

namespace tp {

namespace {

class RepeatedCollective {
 public:
  // lazy_view: a method of the arrays whose true answer means their memory does not hold their
  // values (torch's is_neg); needs_grad: an attribute whose true value means an autograd graph
  // wants the array (torch's requires_grad). Such an array is left to the checking path, which
  // refuses it (or, a gradient under no_grad, runs it there).
  RepeatedCollective(const py::handle& array_type, const std::string& lazy_view, const std::string& needs_grad)
      : reader_(array_type) {
    if (!lazy_view.empty()) lazy_view_ = py::str(lazy_view);
    if (!needs_grad.empty()) needs_grad_ = py::str(needs_grad);
  }

  // Remembers a call the checking path accepted: every rank's array and dst as they are read
  // here, and the bound plan that ran them.
  void remember(std::shared_ptr<BoundPlan> bound, const py::handle& ranks_list, const py::handle& dst) {
    size_t ranks = 0;
    PyObject* const* tensors = rank_items(ranks_list.ptr(), ranks);
    if (!tensors || ranks > kMaxRanks) return;  // run() reads no more
    Signature s;
    s.bound = std::move(bound);
    s.ranks.resize(ranks);
    for (size_t r = 0; r < ranks; ++r) {
      if (!reader_.read(tensors[r], s.ranks[r])) return;
    }
    if (!reader_.read(dst.ptr(), s.dst) || s.dst.device.device_type != dlpack::kDLCUDA) return;
    for (const ArrayView& v : s.ranks) {
      if (v.device.device_type != dlpack::kDLCUDA) return;
    }
    if (const auto seen = find(s.ranks.data(), s.ranks.size(), s.dst); seen != signatures_.end()) {
      signatures_.erase(seen);  // a repeat the checking path took again (its launch declined here)
    } else if (signatures_.size() == kMaxSignatures) {
      signatures_.pop_front();
    }
    signatures_.push_back(std::move(s));
  }

  // dst once the call has been launched on every rank's current stream; None when the arrays
  // match no remembered signature or dst may overlap a source (the checking path then decides).
  py::object run(const py::handle& ranks_list, const py::handle& dst) const {
    size_t ranks = 0;
    PyObject* const* tensors = rank_items(ranks_list.ptr(), ranks);
    if (!tensors || ranks == 0 || ranks > kMaxRanks) return py::none();
    ArrayView views[kMaxRanks], out;
    for (size_t r = 0; r < ranks; ++r) {
      PyObject* x = tensors[r];
      if (!reader_.read(x, views[r]) || declined(x)) return py::none();
    }
    if (!reader_.read(dst.ptr(), out) || declined(dst.ptr())) return py::none();
    const auto found = find(views, ranks, out);
    if (found == signatures_.end()) return py::none();
    const Signature* s = &*found;
    std::uintptr_t pointers[kMaxRanks];
    for (size_t r = 0; r < ranks; ++r) pointers[r] = views[r].pointer;
    const OpCall& call = s->bound->plan().call;
    if (!treduce::dst_overlaps(call.inputs, call.output, pointers, out.pointer, call.treduce->root).empty()) {
      return py::none();
    }
    RunArgs args;
    for (size_t r = 0; r < ranks; ++r) {
      const int device = views[r].device.device_id;
      std::uintptr_t stream = 0;
      if (!reader_.current_stream(device, stream)) return py::none();
      args.inputs.push_back(TensorArg{views[r].pointer, {}, device});
      args.streams.push_back(stream);
    }
    args.output = TensorArg{out.pointer, {}, out.device.device_id};
    s->bound->runner().run(args);  // launches only: the GIL is kept, as for run_collective
    return py::reinterpret_borrow<py::object>(dst);
  }

  size_t size() const { return signatures_.size(); }

 private:
  // The ranks' arrays of a list or a tuple (ParallelGroup.tensors), else null.
  static PyObject* const* rank_items(PyObject* ranks, size_t& n) {
    if (!PyList_CheckExact(ranks) && !PyTuple_CheckExact(ranks)) return nullptr;
    n = static_cast<size_t>(PySequence_Fast_GET_SIZE(ranks));
    return PySequence_Fast_ITEMS(ranks);
  }

  static constexpr size_t kMaxSignatures = 16;
  static constexpr size_t kMaxRanks = 32;

  struct Signature {
    std::shared_ptr<BoundPlan> bound;
    std::vector<ArrayView> ranks;
    ArrayView dst;
  };

  std::deque<Signature>::const_iterator find(const ArrayView* views, size_t ranks, const ArrayView& out) const {
    return std::find_if(signatures_.begin(), signatures_.end(), [&](const Signature& s) {
      bool same = s.ranks.size() == ranks && s.dst.same_layout(out);
      for (size_t r = 0; same && r < ranks; ++r) same = s.ranks[r].same_layout(views[r]);
      return same;
    });
  }

  // Whether the checking path must see `x`: a lazy view, or an array autograd wants (an error
  // asking either counts as yes: the checking path asks again and reports).
  bool declined(PyObject* x) const {
    return (lazy_view_ && truthy(PyObject_CallMethodNoArgs(x, lazy_view_.ptr()))) ||
           (needs_grad_ && truthy(PyObject_GetAttr(x, needs_grad_.ptr())));
  }

  static bool truthy(PyObject* answer) {
    const py::object owned = py::reinterpret_steal<py::object>(answer);
    if (!answer) {
      PyErr_Clear();
      return true;
    }
    const int is_true = PyObject_IsTrue(answer);
    if (is_true < 0) PyErr_Clear();
    return is_true != 0;
  }

  ExchangeReader reader_;
  py::object lazy_view_;   // the method's name, or null
  py::object needs_grad_;  // the attribute's name, or null
  std::deque<Signature> signatures_;
};

}  // namespace

void bind_repeated_calls(py::module_& m) {
  py::class_<RepeatedCollective>(m, "RepeatedCollective")
      .def(py::init<const py::handle&, const std::string&, const std::string&>(), py::arg("array_type"),
           py::arg("lazy_view") = "", py::arg("needs_grad") = "",
           "For arrays of `array_type` (its DLPack C exchange table; ValueError when it has none); an array "
           "whose method `lazy_view` answers true, or whose attribute `needs_grad` is true, is left to the "
           "checking path.")
      .def("remember", &RepeatedCollective::remember, py::arg("bound"), py::arg("tensors"), py::arg("dst"),
           "Remembers a call the checking path accepted and ran, and its bound plan.")
      .def("run", &RepeatedCollective::run, py::arg("tensors"), py::arg("dst"),
           "dst once launched, or None when the call is not one remembered (or dst may overlap a rank).")
      .def_property_readonly("signatures", &RepeatedCollective::size, "How many call signatures it holds.");
}

}  // namespace tp
