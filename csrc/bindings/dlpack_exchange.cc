#include "bindings/dlpack_exchange.h"

#include <algorithm>

#include "errors.h"

namespace py = pybind11;

namespace tp {

bool ArrayView::same_layout(const ArrayView& o) const {
  return device.device_type == o.device.device_type && device.device_id == o.device.device_id &&
         dtype.code == o.dtype.code && dtype.bits == o.dtype.bits && dtype.lanes == o.dtype.lanes && ndim == o.ndim &&
         std::equal(shape, shape + ndim, o.shape) && std::equal(strides, strides + ndim, o.strides);
}

ExchangeReader::ExchangeReader(const py::handle& array_type) {
  if (!PyType_Check(array_type.ptr())) throw TypeError("array_type: expected a type");
  type_ = reinterpret_cast<PyTypeObject*>(array_type.ptr());
  keep_ = py::reinterpret_borrow<py::object>(array_type);
  // A PyCapsule named "dlpack_exchange_api" (the standard's form; PyTorch 2.11 and later), or
  // the table's address as an int (the form the standard's proposal had).
  const py::object table = py::getattr(array_type, "__dlpack_c_exchange_api__", py::none());
  const void* address = nullptr;
  if (PyCapsule_IsValid(table.ptr(), "dlpack_exchange_api")) {
    address = PyCapsule_GetPointer(table.ptr(), "dlpack_exchange_api");
  } else if (PyLong_CheckExact(table.ptr())) {
    address = PyLong_AsVoidPtr(table.ptr());
    if (PyErr_Occurred()) throw py::error_already_set();
  }
  if (!address) throw ValueError(std::string(type_->tp_name) + " publishes no DLPack C exchange table");
  // A newer major version links to the older tables it still offers.
  auto* header = static_cast<const dlpack::ExchangeApiHeader*>(address);
  while (header && !(header->version.major == 1 && header->version.minor >= 3)) header = header->prev_api;
  api_ = reinterpret_cast<const dlpack::ExchangeApi*>(header);
  if (!api_ || !api_->dltensor_from_py_object_no_sync || !api_->current_work_stream) {
    throw ValueError(std::string(type_->tp_name) + "'s DLPack C exchange table has no version 1.3+ array reader");
  }
}

bool ExchangeReader::read(PyObject* obj, ArrayView& out) const {
  if (Py_TYPE(obj) != type_) return false;
  dlpack::DLTensor t{};
  if (api_->dltensor_from_py_object_no_sync(obj, &t) != 0) {
    PyErr_Clear();
    return false;
  }
  if (t.ndim < 0 || t.ndim > ArrayView::kMaxDims || t.dtype.bits % 8) return false;
  out.pointer = reinterpret_cast<std::uintptr_t>(t.data) + t.byte_offset;
  out.device = t.device;
  out.dtype = t.dtype;
  out.ndim = t.ndim;
  int64_t stride = 1;  // null strides: C order
  for (int d = t.ndim - 1; d >= 0; --d) {
    out.shape[d] = t.shape[d];
    out.strides[d] = t.strides ? t.strides[d] : stride;
    stride *= t.shape[d];
  }
  return true;
}

bool ExchangeReader::current_stream(int device, std::uintptr_t& out) const {
  void* stream = nullptr;
  if (api_->current_work_stream(dlpack::kDLCUDA, device, &stream) != 0) {
    PyErr_Clear();
    return false;
  }
  out = reinterpret_cast<std::uintptr_t>(stream);
  return true;
}

}  // namespace tp
