#include <pybind11/pybind11.h>

#include "backends/cpu/executors.h"
#include "backends/cpu/program_runner.h"
#include "backends/cuda/executors.h"
#include "backends/cuda/program_executor.h"
#include "bindings/bindings.h"
#include "dispatch/executor.h"
#include "errors.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "tileprim core: layouts, dispatch registry, CPU and CUDA backends";
  static py::exception<tp::DispatchError> dispatch_error(m, "DispatchError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const tp::DispatchError& e) {
      py::set_error(dispatch_error, e.what());
    } catch (const tp::TypeError& e) {
      py::set_error(PyExc_TypeError, e.what());
    } catch (const tp::ValueError& e) {
      py::set_error(PyExc_ValueError, e.what());
    }
  });
  tp::register_cpu_executors(tp::ExecutorTable::instance());
  tp::cuda::register_cuda_executors(tp::ExecutorTable::instance());
  tp::register_cpu_program_executor();
  tp::cuda::register_cuda_program_executor();
  tp::bind_layout(m);
  tp::bind_dispatch(m);
  tp::bind_treduce(m);
  tp::bind_repeated_calls(m);
  tp::bind_cuda_runtime(m);
  tp::bind_cuda_backend(m);
  tp::bind_comm(m);
  tp::bind_nccl(m);
  tp::bind_testing(m);
  tp::bind_program(m);
}
