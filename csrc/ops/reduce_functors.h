// The reduction functors on the host: the CPU backend runs the device templates with the same
// functor types the kernels name, found by the name the op table gives (OpDef::device_fn).
// Adding a reduction op: its op-table entry and its functor (reduction/ops.cuh), listed here.
#pragma once
#include <stdexcept>
#include <string>
#include <type_traits>

#include "ops/host_types.h"
#include "tileprim/reduction/ops.cuh"

namespace tp {

namespace reduce_op {

// A throwaway op that only tests register (_C._testing.register_test_reduction): it shows that
// an op-table entry plus its functor is all a reduction op needs. The product, one rounding
// per step (a 16-bit product is exact in float).
struct ProductForTests {
  static constexpr const char* kName = "tp::reduce_op::ProductForTests";
  static constexpr bool kRunsOnPacks = false;  // mul has no Pack overload (backends/cpu/pack.h)
  template <class T> static T identity() { return cast<T>(1.0f); }
  template <class T> static T apply(T a, T b) { return mul(a, b); }
  static int apply(int a, int b) { return static_cast<int>(static_cast<unsigned>(a) * static_cast<unsigned>(b)); }
};

}  // namespace reduce_op

// Whether the CPU's packed fast path may run Op on Packs of lanes: yes unless Op says otherwise
// (its primitives need Pack overloads, backends/cpu/pack.h).
template <class Op, class = void> struct runs_on_packs : std::true_type {};
template <class Op>
struct runs_on_packs<Op, std::void_t<decltype(Op::kRunsOnPacks)>> : std::bool_constant<Op::kRunsOnPacks> {};

template <class... Ops> struct ReduceFunctorList {};
using ReduceFunctors = ReduceFunctorList<reduce_op::Sum, reduce_op::Max, reduce_op::Min, reduce_op::MaxNaN,
                                         reduce_op::MinNaN, reduce_op::ProductForTests>;

// Calls f(Op{}) with the functor the op table names `name`.
template <class F, class Op, class... Rest>
void with_reduce_functor(const std::string& name, F&& f, ReduceFunctorList<Op, Rest...>) {
  if (name == Op::kName) return f(Op{});
  if constexpr (sizeof...(Rest) > 0) {
    with_reduce_functor(name, f, ReduceFunctorList<Rest...>{});
  } else {
    throw std::logic_error("no host reduction functor " + name + "; list it in ops/reduce_functors.h");
  }
}
template <class F> void with_reduce_functor(const std::string& name, F&& f) {
  with_reduce_functor(name, f, ReduceFunctors{});
}

}  // namespace tp
