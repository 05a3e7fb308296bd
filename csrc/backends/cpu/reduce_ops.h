// From a reduction plan's ReduceKind to the device template's operator type.
#pragma once
#include "tileprim/reduction/ops.cuh"
#include "variants/reduction/reduction_common.h"

namespace tp {

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
