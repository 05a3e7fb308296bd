// The reduction operators: a combine and its identity; kName is how the op table (and the
// generated kernels) spell each, and ops/reduce_functors.h lists them for the CPU backend.
// Sum's identity is -0.0, the exact IEEE additive identity (x + -0.0 == x for every x, -0.0
// included). For max/min, NaN is the true identity of fmaxf/fminf (a NaN meeting a number
// yields the number), so a slice of only NaNs reduces to NaN however the lanes are grouped;
// the NaN-propagating forms use -inf/+inf.
#pragma once
#include "../numeric.cuh"

namespace tp {
namespace reduce_op {

struct Sum {
  static constexpr const char* kName = "tp::reduce_op::Sum";
  template <class T> static TP_HD T identity() { return limits<T>::neg_zero(); }
  template <class T> static TP_HD T apply(T a, T b) { return add(a, b); }
};
// NaN meeting a number yields the number (CUDA fmaxf / fminf).
struct Max {
  static constexpr const char* kName = "tp::reduce_op::Max";
  template <class T> static TP_HD T identity() { return limits<T>::quiet_nan(); }
  template <class T> static TP_HD T apply(T a, T b) { return max_num(a, b); }
};
struct Min {
  static constexpr const char* kName = "tp::reduce_op::Min";
  template <class T> static TP_HD T identity() { return limits<T>::quiet_nan(); }
  template <class T> static TP_HD T apply(T a, T b) { return min_num(a, b); }
};
// propagate_nan=True: the .NaN instruction forms.
struct MaxNaN {
  static constexpr const char* kName = "tp::reduce_op::MaxNaN";
  template <class T> static TP_HD T identity() { return limits<T>::neg_inf(); }
  template <class T> static TP_HD T apply(T a, T b) { return max_nan(a, b); }
};
struct MinNaN {
  static constexpr const char* kName = "tp::reduce_op::MinNaN";
  template <class T> static TP_HD T identity() { return limits<T>::pos_inf(); }
  template <class T> static TP_HD T apply(T a, T b) { return min_nan(a, b); }
};

}  // namespace reduce_op

// Max and min (either NaN form) give the same result whatever the order of the fold, so a lane's
// float16 or bfloat16 registers fold two at a time, one paired instruction each (lane_reduce); a
// sum's order is its bits, so it folds one at a time.
template <class Op, class T> struct FoldsPairs {
  static constexpr bool value = false;
};
template <class T> struct TwoLanes {};
#if TP_ON_DEVICE
#define TP_FOLDS_PAIRS(T, T2)                                                              \
  template <> struct TwoLanes<T> {                                                         \
    using type = T2;                                                                       \
  };                                                                                       \
  template <> struct FoldsPairs<reduce_op::Max, T> { static constexpr bool value = true; };    \
  template <> struct FoldsPairs<reduce_op::Min, T> { static constexpr bool value = true; };    \
  template <> struct FoldsPairs<reduce_op::MaxNaN, T> { static constexpr bool value = true; }; \
  template <> struct FoldsPairs<reduce_op::MinNaN, T> { static constexpr bool value = true; };
#if defined(TP_WITH_FP16)
TP_FOLDS_PAIRS(__half, __half2)
#endif
#if defined(TP_WITH_BF16)
TP_FOLDS_PAIRS(__nv_bfloat16, __nv_bfloat162)
#endif
#undef TP_FOLDS_PAIRS
#endif

}  // namespace tp
