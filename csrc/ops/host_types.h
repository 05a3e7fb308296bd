// From run-time dtype tags to the host types the device templates are instantiated with on
// the CPU (half_t and bfloat16_t emulate the GPU's exactly rounded 16-bit arithmetic).
#pragma once
#include "ops/dtype.h"
#include "ops/host_float16.h"

// Host loops worth a second, AVX + FMA build: the CPU picks it at load time where it has them.
// Every op still rounds once (-ffp-contract=off holds in both), so the bits do not change.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define TP_HOST_VECTOR_CLONES __attribute__((noinline, flatten, target_clones("fma", "default")))
#else
#define TP_HOST_VECTOR_CLONES
#endif

namespace tp {

template <class T> struct type_tag {
  using type = T;
};

// The floating-point tile dtypes.
template <class F> void with_host_float(DType t, F&& f) {
  switch (t) {
    case DType::float16: return f(type_tag<half_t>{});
    case DType::bfloat16: return f(type_tag<bfloat16_t>{});
    case DType::float32: return f(type_tag<float>{});
    case DType::float64: return f(type_tag<double>{});
    case DType::int32:
    case DType::int64: break;
  }
  throw std::logic_error(std::string("no host float type for ") + dtype_name(t));
}

// Every tile dtype: the floats and the index types.
template <class F> void with_host_value(DType t, F&& f) {
  if (t == DType::int32) return f(type_tag<int>{});
  if (t == DType::int64) return f(type_tag<long long>{});
  with_host_float(t, f);
}

}  // namespace tp
