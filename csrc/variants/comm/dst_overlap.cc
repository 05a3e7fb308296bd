#include "variants/comm/dst_overlap.h"

#include <utility>

#include "variants/comm/treduce_common.h"

namespace tp::treduce {

namespace {

// The bytes [low, high) a non-empty tensor at `pointer` spans.
std::pair<int64_t, int64_t> byte_extent(const TileRef& t, std::uintptr_t pointer) {
  const auto [low, high] = element_extent(t.shape, t.strides);
  const int64_t size = dtype_size(t.dtype), at = static_cast<int64_t>(pointer);
  return {at + low * size, at + (high + 1) * size};
}

}  // namespace

std::vector<int> dst_overlaps(const std::vector<TileRef>& ranks, const TileRef& dst, const std::uintptr_t* pointers,
                              std::uintptr_t dst_pointer, int root) {
  std::vector<int> met;
  if (dst.elements() == 0) return met;
  const auto [dst_low, dst_high] = byte_extent(dst, dst_pointer);
  bool root_met = false;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    const TileRef& t = ranks[r];
    if (pointers[r] == 0 || t.device != dst.device || t.elements() == 0) continue;
    const auto [low, high] = byte_extent(t, pointers[r]);
    if (!(dst_low < high && low < dst_high)) continue;
    if (r != root) {
      met.push_back(r);
    } else {
      root_met = pointers[r] != dst_pointer || t.strides != dst.strides;  // not the root's tensor itself
    }
  }
  if (root_met) met.push_back(root);
  return met;
}

}  // namespace tp::treduce
