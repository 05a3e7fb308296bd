// pybind11 glue: each file binds one part of the core into tileprim._C.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dispatch/context.h"
#include "dispatch/executor.h"
#include "dispatch/op_call.h"

namespace tp {
void bind_layout(pybind11::module_& m);
void bind_dispatch(pybind11::module_& m);
void bind_repeated_calls(pybind11::module_& m);
void bind_treduce(pybind11::module_& m);
void bind_cuda_runtime(pybind11::module_& m);
void bind_cuda_backend(pybind11::module_& m);
void bind_comm(pybind11::module_& m);
void bind_nccl(pybind11::module_& m);
void bind_testing(pybind11::module_& m);
void bind_program(pybind11::module_& m);
// The addresses of C-contiguous NumPy arrays (a program's host inputs or outputs); TypeError or
// ValueError naming `what` for anything else.
std::vector<std::uintptr_t> host_addresses(const pybind11::list& arrays, const char* what);
// Whether Ctrl-C was pressed (a pending signal raised in Python): host work polls it with the GIL
// released.
bool python_interrupted();
// run() with the GIL released, its `interrupted` set to python_interrupted: Ctrl-C raises
// KeyboardInterrupt within ~20 ms and leaves the caller's arrays as they were (the caller passes
// fresh outputs).
template <class Args, class Run> void run_released(Args& args, Run run) {
  args.interrupted = python_interrupted;
  try {
    pybind11::gil_scoped_release release;
    run(args);
  } catch (const Interrupted&) {
    throw pybind11::error_already_set();
  }
}
// A **config value (a variant's option) from Python: bool, int, float or str; TypeError naming `key`
// for anything else.
ConfigValue config_value(const std::string& key, const pybind11::handle& v);
// The context dispatch sees: the target, the backend and, on CUDA, which devices reach which.
DispatchContext make_context(const std::string& target, const std::string& backend, const std::vector<int>& devices);
}  // namespace tp
