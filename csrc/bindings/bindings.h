// pybind11 glue: each file binds one part of the core into tileprim._C.
#pragma once
#include <pybind11/pybind11.h>

namespace tp {
void bind_layout(pybind11::module_& m);
void bind_dispatch(pybind11::module_& m);
void bind_repeated_calls(pybind11::module_& m);
void bind_cuda_runtime(pybind11::module_& m);
void bind_cuda_backend(pybind11::module_& m);
void bind_comm(pybind11::module_& m);
void bind_nccl(pybind11::module_& m);
void bind_testing(pybind11::module_& m);
}  // namespace tp
