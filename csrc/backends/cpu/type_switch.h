// From run-time tags to the host types and operators the algorithm templates take.
#pragma once
#include "backends/cpu/host_float16.h"
#include "dispatch/dtype.h"
#include "tileprim/reduction/ops.cuh"
#include "variants/reduction/reduction_common.h"

namespace tp {

template <class T> struct type_tag {
  using type = T;
};

template <class F> void with_host_type(DType t, F&& f) {
  switch (t) {
    case DType::float16: return f(type_tag<half_t>{});
    case DType::bfloat16: return f(type_tag<bfloat16_t>{});
    case DType::float32: return f(type_tag<float>{});
    case DType::float64: return f(type_tag<double>{});
  }
}

template <class F> void with_reduce_op(ReduceKind k, F&& f) {
  switch (k) {
    case ReduceKind::sum: return f(reduce_op::Sum{});
    case ReduceKind::max: return f(reduce_op::Max{});
    case ReduceKind::min: return f(reduce_op::Min{});
    case ReduceKind::max_nan: return f(reduce_op::MaxNaN{});
    case ReduceKind::min_nan: return f(reduce_op::MinNaN{});
  }
}

}  // namespace tp
