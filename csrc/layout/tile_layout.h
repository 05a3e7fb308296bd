// TileLayout: shard iters place each element, replica iters copy it, an offset shifts it.
// For a logical flat index x the shard digits are c_k = (x / prod_{l>k} e_l) mod e_k and
// the positions are { sum_k c_k s_k @ axis_k + r + offset | r in replica }.
// A padded layout places only its first `elements()` flat indices: the shard's positions past
// them are slots that hold no element (a ragged tile spread over all of a scope's threads).
// Host-only value type; the memory part becomes a tp::MemLayout for the kernels.
// Construction rejects any layout whose size, span or positions do not fit in int64, so the
// arithmetic after it (positions, group, memory_offset) cannot overflow.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "layout/axis.h"
#include "tileprim/layout.cuh"

namespace tp {

struct Iter {
  long long extent;
  long long stride;
  Axis axis;
  bool operator==(const Iter& o) const {
    return extent == o.extent && stride == o.stride && axis == o.axis;
  }
};

// Coordinates on named axes; axes the layout never mentions are absent.
using Position = std::map<Axis, long long>;

// The iters that one logical dimension owns after TileLayout::group.
struct DimIters {
  std::vector<Iter> iters;
  long long thread_extent = 1;  // product of the thread-axis iters' extents
  long long local_extent = 1;   // product of the memory iters' extents
};

// Throws ValueError naming `swizzle` unless 0 <= swizzle_len <= atom_len, per_element >= 0 and
// per_element + swizzle_len + atom_len <= kMaxSwizzleBits.
constexpr long long kMaxSwizzleBits = 32;
void check_swizzle(long long per_element, long long swizzle_len, long long atom_len);

class TileLayout {
 public:
  // positions() lists at most this many places per element
  static constexpr long long kMaxPositions = 1ll << 16;

  TileLayout(std::vector<Iter> shard, std::vector<Iter> replica = {},
             std::map<Axis, long long> offset = {}, Swizzle swizzle = {0, 0, 0});
  static TileLayout row_major(const std::vector<long long>& shape);

  const std::vector<Iter>& shard() const { return shard_; }
  const std::vector<Iter>& replica() const { return replica_; }
  const std::map<Axis, long long>& offset() const { return offset_; }
  const Swizzle& swizzle() const { return swizzle_; }
  bool swizzled() const { return swizzle_.swizzle_len != 0; }

  long long size() const { return size_; }  // positions the shard names
  // Elements it places: the flat indices [0, elements()); size() unless padded.
  long long elements() const { return elements_; }
  bool padded() const { return elements_ < size_; }
  // The same layout placing only the first `elements` flat indices (1 <= elements <= size()).
  TileLayout padded_to(long long elements) const;
  std::vector<long long> shape() const;  // the shard's extents
  bool has_thread_axes() const;
  std::vector<Axis> thread_axes() const;  // in first-use order

  // The same layout with every thread iter and thread offset dropped: one thread's view.
  TileLayout storage() const;
  // Memory slots one thread (or one shared tile) needs: the span of the memory iters plus
  // the memory offset, rounded up to whole swizzle blocks.
  long long span() const { return span_; }

  // Places per element: the product of the replica extents; throws ValueError past kMaxPositions.
  long long copies() const;
  Position place(long long flat) const;  // the shard position
  // Every replica of it; throws ValueError for a flat index outside [0, size) or an element
  // with more than kMaxPositions places.
  std::vector<Position> positions(long long flat) const;

  // Splits the shard into consecutive iters per logical dim (splitting an iter where a dim
  // boundary falls inside it); throws ValueError when the shape does not fit or has a dim
  // below 1. A padded layout's padding lies in dim 0: that dim's iters span past its size.
  std::vector<DimIters> group(const std::vector<long long>& shape) const;

  // The memory part for kernels; requires a layout without thread axes.
  MemLayout memory_layout() const;

  std::string str() const;  // in the seeds' syntax
  bool operator==(const TileLayout& o) const;
  size_t hash() const;  // equal layouts (operator==) hash alike

 private:
  void check_parts() const;
  void measure();  // size_ and span_, or ValueError when a position does not fit in int64

  std::vector<Iter> shard_;
  std::vector<Iter> replica_;
  std::map<Axis, long long> offset_;
  Swizzle swizzle_;
  long long size_ = 1;
  long long elements_ = 1ll << 62;  // measure() sets it to size_
  long long span_ = 1;
};

std::string shape_str(const std::vector<long long>& shape);

}  // namespace tp
