// Reading Python arrays through their type's DLPack C exchange table (DLPack 1.3,
// `type(x).__dlpack_c_exchange_api__`, published by PyTorch): an array's pointer, layout and
// device, and a device's current stream, by C calls into the array's library. A repeated call
// reads its arrays this way instead of through Python attributes (a few hundred ns each).
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>

#include "backends/cuda/dlpack.h"

namespace tp {

// One array as its library describes it, copied out of the library's transient view.
struct ArrayView {
  static constexpr int kMaxDims = 8;  // more: not read here (the checking path takes the call)
  std::uintptr_t pointer = 0;
  dlpack::DLDevice device{};
  dlpack::DLDataType dtype{};
  int ndim = 0;
  int64_t shape[kMaxDims]{};
  int64_t strides[kMaxDims]{};  // in elements

  // Same dtype, device, shape and strides (not the pointer).
  bool same_layout(const ArrayView& o) const;
};

class ExchangeReader {
 public:
  // The reader of `array_type`'s exchange table; throws ValueError when the type publishes none
  // of a version read here.
  explicit ExchangeReader(const pybind11::handle& array_type);

  // The view of `obj` when it is exactly of this reader's type and its library can describe it;
  // false otherwise (any error the library raised is cleared: the caller takes the checking path).
  bool read(PyObject* obj, ArrayView& out) const;
  // The library's current stream of CUDA device `device`; false (error cleared) when it has none.
  bool current_stream(int device, std::uintptr_t& out) const;

 private:
  PyTypeObject* type_;
  const dlpack::ExchangeApi* api_;
  pybind11::object keep_;  // the type (its table lives as long as it)
};

}  // namespace tp
