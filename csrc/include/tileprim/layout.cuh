// Where a tile element lives in memory (shared memory, or a thread's registers): the
// memory part of a TileLayout as a small value type. Generated kernels hold these as
// constexpr values, so the div/mod chains fold into shifts and constants; the CPU backend
// evaluates the very same function.
#pragma once
#include "config.cuh"

namespace tp {

// addr -> f(addr >> M) << M | (addr & (2^M - 1)),  f(x) = x ^ ((x & ((2^B - 1) << S)) >> S).
// B == 0 is the identity.
struct Swizzle {
  int per_element;  // M
  int swizzle_len;  // B
  int atom_len;     // S
};

TP_HD long long swizzle_address(long long addr, const Swizzle& s) {
  if (s.swizzle_len == 0) return addr;
  const long long low = addr & ((1ll << s.per_element) - 1);
  const long long x = addr >> s.per_element;
  const long long mask = ((1ll << s.swizzle_len) - 1) << s.atom_len;
  return ((x ^ ((x & mask) >> s.atom_len)) << s.per_element) | low;
}

// A shard of memory iters (row-major digits of the logical flat index), plus an offset.
struct MemLayout {
  int n;
  long long extent[kMaxIters];
  long long stride[kMaxIters];
  long long offset;
  Swizzle swizzle;
};

TP_HD long long memory_offset(const MemLayout& L, long long flat) {
  long long addr = L.offset;
  TP_UNROLL
  for (int k = L.n - 1; k >= 0; --k) {
    addr += (flat % L.extent[k]) * L.stride[k];
    flat /= L.extent[k];
  }
  return swizzle_address(addr, L.swizzle);
}

}  // namespace tp
