// tileprim._C._testing: hooks only the tests call. register_test_reduction adds a throwaway
// reduction op, "prod_test", the way README's "Adding an op" says: its op-table entry over its
// functor (reduce_op::ProductForTests, ops/reduce_functors.h); nothing else knows it.
#include <pybind11/pybind11.h>

#include "bindings/bindings.h"
#include "dispatch/plan_cache.h"
#include "ops/op_table.h"
#include "ops/reduce_functors.h"

namespace py = pybind11;

namespace tp {

namespace {

constexpr const char* kTestReduction = "prod_test";

}  // namespace

void bind_testing(py::module_& m) {
  py::module_ t = m.def_submodule("_testing", "hooks for tileprim's own tests");
  t.def("register_test_reduction", [] {
    register_op(reduction_entry<reduce_op::ProductForTests>(
        kTestReduction, {ReductionKind::other, "1.0", "", "IEEE: NaN propagates", ""}, "the product over axes (tests)"));
    return kTestReduction;
  });
  t.def("unregister_test_reduction", [] {
    PlanCache::instance().clear();  // plans of it name its entry
    unregister_op(kTestReduction);
  });
}

}  // namespace tp
