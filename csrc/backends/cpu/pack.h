// Pack<T, N>: N independent values that every scalar op of numeric.cuh (and the host 16-bit
// types) acts on lane by lane, each lane rounding exactly as the scalar op does. Instantiating a
// device template with a Pack runs N scope instances at once with the same bits: the CPU's
// fast path for tiles whose lanes never talk (thread scope), where a fold's dependent adds of
// one tile would otherwise leave the core idle.
//
// A Pack is made of parts. float and double parts are native vectors of lanes (GCC/Clang vector
// extensions): an add is the vector add (IEEE per lane), and max/min run numeric.cuh's own
// select templates on whole vectors. The 16-bit classes go lane by lane.
#pragma once
#include <cstring>
#include <type_traits>

#include "ops/host_float16.h"
#include "tileprim/numeric.cuh"

namespace tp {

#if defined(__GNUC__)
// 16 bytes: native in every build (SSE2, NEON; the AVX build of the fold takes the VEX forms).
// GCC lowers the selects of a wider vector to scalars in these baseline-built helpers.
constexpr int kVectorBytes = 16;
template <class T> constexpr bool kVectorParts = std::is_same_v<T, float> || std::is_same_v<T, double>;

template <class T> struct VectorLanes {
  typedef T V __attribute__((vector_size(kVectorBytes)));
  V v;
};

template <class T> inline VectorLanes<T> add(const VectorLanes<T>& a, const VectorLanes<T>& b) { return {a.v + b.v}; }
// What numeric.cuh's host_max_num & co. ask of their operand type, lane-wise: a comparison gives
// a mask (all ones where true), pick selects by it.
template <class T> inline auto operator>(const VectorLanes<T>& a, const VectorLanes<T>& b) { return a.v > b.v; }
template <class T> inline auto operator<(const VectorLanes<T>& a, const VectorLanes<T>& b) { return a.v < b.v; }
template <class T> inline auto operator==(const VectorLanes<T>& a, const VectorLanes<T>& b) { return a.v == b.v; }
template <class T> inline auto is_nan(const VectorLanes<T>& a) { return a.v != a.v; }
template <class T> inline auto bits_of(const VectorLanes<T>& a) { return (decltype(a.v == a.v))a.v; }
template <class T, class Bits> inline VectorLanes<T> with_bits(const VectorLanes<T>&, Bits u) {
  return {(typename VectorLanes<T>::V)u};
}
template <class T, class Mask> inline VectorLanes<T> pick(Mask m, const VectorLanes<T>& x, const VectorLanes<T>& y) {
  return {m ? x.v : y.v};
}
template <class T> inline VectorLanes<T> max_num(const VectorLanes<T>& a, const VectorLanes<T>& b) { return host_max_num(a, b); }
template <class T> inline VectorLanes<T> min_num(const VectorLanes<T>& a, const VectorLanes<T>& b) { return host_min_num(a, b); }
template <class T> inline VectorLanes<T> max_nan(const VectorLanes<T>& a, const VectorLanes<T>& b) { return host_max_nan(a, b); }
template <class T> inline VectorLanes<T> min_nan(const VectorLanes<T>& a, const VectorLanes<T>& b) { return host_min_nan(a, b); }
template <class T> struct limits<VectorLanes<T>> {
  static VectorLanes<T> quiet_nan() {
    VectorLanes<T> r;
    for (size_t i = 0; i < kVectorBytes / sizeof(T); ++i) r.v[i] = limits<T>::quiet_nan();
    return r;
  }
};
#else
template <class T> constexpr bool kVectorParts = false;
template <class T> struct VectorLanes;
constexpr int kVectorBytes = 0;
#endif

template <class T> using PackPart = std::conditional_t<kVectorParts<T>, VectorLanes<T>, T>;

template <class T, int N> struct Pack {
  static constexpr int kPartLanes = static_cast<int>(sizeof(PackPart<T>) / sizeof(T));
  static_assert(N % kPartLanes == 0, "a Pack is whole parts");
  PackPart<T> part[N / kPartLanes];  // lane l is the l-th T of these bytes

  T lane(int l) const {
    T x;
    std::memcpy(static_cast<void*>(&x), reinterpret_cast<const unsigned char*>(part) + l * sizeof(T), sizeof(T));
    return x;
  }
  void set_lane(int l, T x) {
    std::memcpy(reinterpret_cast<unsigned char*>(part) + l * sizeof(T), static_cast<const void*>(&x), sizeof(T));
  }
};

#define TP_PACK_BINARY(fn)                                                              \
  template <class T, int N> inline Pack<T, N> fn(const Pack<T, N>& a, const Pack<T, N>& b) { \
    Pack<T, N> r;                                                                         \
    for (int i = 0; i < N / Pack<T, N>::kPartLanes; ++i) r.part[i] = fn(a.part[i], b.part[i]); \
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
    for (int i = 0; i < N; ++i) r.set_lane(i, x);
    return r;
  }
  static Pack<T, N> neg_zero() { return all(limits<T>::neg_zero()); }
  static Pack<T, N> pos_inf() { return all(limits<T>::pos_inf()); }
  static Pack<T, N> neg_inf() { return all(limits<T>::neg_inf()); }
  static Pack<T, N> quiet_nan() { return all(limits<T>::quiet_nan()); }
};

}  // namespace tp
