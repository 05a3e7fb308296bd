// transpose_block: W rows of W elements in, W columns out (column c holds every row's element c),
// W = the elements of one 16-byte vector. The packed CPU path stages W tiles' runs into the lanes
// of its Packs this way: log2(W) rounds of W interleaving shuffles per W*W elements, instead of
// a strided load and a store per element.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace tp {

template <class T> constexpr int kTransposeWidth = 16 / static_cast<int>(sizeof(T));

namespace transpose_detail {

// the bits move, whatever T is (the host 16-bit types are classes)
template <class T>
using Bits = std::conditional_t<sizeof(T) == 2, std::uint16_t, std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>;

#if defined(__GNUC__)
template <class T> struct Vec16 {
  typedef Bits<T> type __attribute__((vector_size(16)));
};

// Lane k of zip(a, b): the low (kHigh false) or high halves of a and b interleaved, a first.
template <bool kHigh, class V, std::size_t... K> inline V zip(V a, V b, std::index_sequence<K...>) {
  constexpr int n = sizeof...(K);
  constexpr int base = kHigh ? n / 2 : 0;
#if defined(__clang__)
  return __builtin_shufflevector(a, b, (K % 2 ? n : 0) + base + static_cast<int>(K / 2)...);
#else
  typedef decltype(a == a) Mask;
  return __builtin_shuffle(a, b, Mask{((K % 2 ? n : 0) + base + static_cast<int>(K / 2))...});
#endif
}
#endif

}  // namespace transpose_detail

// `rows[r]` points at row r's W elements, `cols[c]` at the bytes receiving column c (any alignment).
template <class T> inline void transpose_block(const T* const rows[kTransposeWidth<T>], void* const cols[kTransposeWidth<T>]) {
  constexpr int W = kTransposeWidth<T>;
#if defined(__GNUC__)
  using V = typename transpose_detail::Vec16<T>::type;
  static_assert(sizeof(V) == W * sizeof(T), "one row is one vector");
  constexpr auto lanes = std::make_index_sequence<W>{};
  V r[W], next[W];
  for (int i = 0; i < W; ++i) std::memcpy(&r[i], rows[i], sizeof(V));
  // log2(W) perfect shuffles: row i meets row i + W/2 each round, and the rows end transposed
  for (int round = 1; round < W; round *= 2) {
    for (int i = 0; i < W / 2; ++i) {
      next[2 * i] = transpose_detail::zip<false>(r[i], r[i + W / 2], lanes);
      next[2 * i + 1] = transpose_detail::zip<true>(r[i], r[i + W / 2], lanes);
    }
    std::memcpy(r, next, sizeof(r));
  }
  for (int c = 0; c < W; ++c) std::memcpy(cols[c], &r[c], sizeof(V));
#else
  for (int c = 0; c < W; ++c) {
    for (int i = 0; i < W; ++i) std::memcpy(static_cast<char*>(cols[c]) + i * sizeof(T), rows[i] + c, sizeof(T));
  }
#endif
}

}  // namespace tp
