// Pack<T, N>: N independent values that every scalar op of numeric.cuh (and the host 16-bit
// types) acts on lane by lane, each lane rounding exactly as the scalar op does. Instantiating a
// device template with a Pack runs N scope instances at once with the same bits: the CPU's
// fast path for tiles whose lanes never talk (thread scope), where a fold's dependent adds of
// one tile would otherwise leave the core idle.
#pragma once
#include "ops/host_float16.h"
#include "tileprim/numeric.cuh"

namespace tp {

template <class T, int N> struct Pack {
  T v[N];
};

#define TP_PACK_BINARY(fn)                                                              \
  template <class T, int N> inline Pack<T, N> fn(const Pack<T, N>& a, const Pack<T, N>& b) { \
    Pack<T, N> r;                                                                         \
    for (int i = 0; i < N; ++i) r.v[i] = fn(a.v[i], b.v[i]);                              \
    return r;                                                                             \
  }
TP_PACK_BINARY(add)
TP_PACK_BINARY(max_num)
TP_PACK_BINARY(min_num)
TP_PACK_BINARY(max_nan)
TP_PACK_BINARY(min_nan)
#undef TP_PACK_BINARY

template <class T, int N> struct limits<Pack<T, N>> {
  static Pack<T, N> all(T x) {
    Pack<T, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = x;
    return r;
  }
  static Pack<T, N> neg_zero() { return all(limits<T>::neg_zero()); }
  static Pack<T, N> pos_inf() { return all(limits<T>::pos_inf()); }
  static Pack<T, N> neg_inf() { return all(limits<T>::neg_inf()); }
  static Pack<T, N> quiet_nan() { return all(limits<T>::quiet_nan()); }
};

}  // namespace tp
