// Overflow-checked int64 arithmetic for the layout algebra. Extents, strides and offsets
// come from users, so a sum or product of them may not fit in 64 bits; the layout checks
// them once, at construction, and says which part broke the bound.
#pragma once
#include <string>

namespace tp {

// false when a + b or a * b does not fit in a long long (out is then unspecified)
inline bool checked_add(long long a, long long b, long long& out) {
  return !__builtin_add_overflow(a, b, &out);
}
inline bool checked_mul(long long a, long long b, long long& out) {
  return !__builtin_mul_overflow(a, b, &out);
}

// Numbers in overflow messages: "2**61" for a large power of two, else decimal.
inline std::string int_str(long long v) {
  if (v >= (1ll << 16) && (v & (v - 1)) == 0) return "2**" + std::to_string(__builtin_ctzll(v));
  return std::to_string(v);
}

}  // namespace tp
