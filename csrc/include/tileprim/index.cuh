// int32 and int64 tiles: the labels and indices a program takes beside its float tiles (a
// vocabulary's class index per row, say). They are compared, selected, cast to a float dtype and
// used by take_along_axis; nothing rounds them. This file gives them what the float types have in
// numeric.cuh: limits (a slot holding no element, and a poisoned one, is the type's minimum: as an
// index it lies outside every row), widen, conversion from a scalar, and the cast to each float
// type, rounded once to nearest even.
//
// Included by numeric.cuh after its conversions, so that the templates of the maps see these
// overloads where they are defined.
#pragma once

namespace tp {

template <> struct limits<int> {
  static TP_HD int quiet_nan() { return -2147483647 - 1; }
};
template <> struct limits<long long> {
  static TP_HD long long quiet_nan() { return -9223372036854775807ll - 1; }
};

TP_HD long long widen(long long x) { return x; }
template <> struct convert_to<long long> {
  static TP_HD long long from(long long x) { return x; }
  static TP_HD long long from(int x) { return x; }
  static TP_HD long long from(double x) { return static_cast<long long>(x); }  // an integral scalar
};

// An index as To, rounded once to nearest even: float and double by the one conversion
// instruction (on the GPU and the host alike); the 16-bit types through double, where |x| past
// 2^53 keeps its top 53 bits with the rest's OR as the last (rounding to odd, exact in double), so
// that the one rounding to 16 bits is the correct one; the integer types as they are.
template <class To> struct index_to {
  static TP_HD To from(long long x) {
    const unsigned long long u = x < 0 ? 0ull - static_cast<unsigned long long>(x) : static_cast<unsigned long long>(x);
    const bool wide = u >= (1ull << 53);
    const unsigned long long kept = wide ? (u >> 11) | ((u & 0x7ffull) != 0 ? 1ull : 0ull) : u;
    const double d = static_cast<double>(kept) * (wide ? 2048.0 : 1.0);
    return convert_to<To>::from(x < 0 ? -d : d);
  }
};
template <> struct index_to<float> {
  static TP_HD float from(long long x) { return static_cast<float>(x); }
};
template <> struct index_to<double> {
  static TP_HD double from(long long x) { return static_cast<double>(x); }
};
template <> struct index_to<int> {
  static TP_HD int from(long long x) { return static_cast<int>(x); }
};
template <> struct index_to<long long> {
  static TP_HD long long from(long long x) { return x; }
};
template <class To> TP_HD To cast(int x) { return index_to<To>::from(x); }
template <class To> TP_HD To cast(long long x) { return index_to<To>::from(x); }

}  // namespace tp
