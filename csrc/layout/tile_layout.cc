#include "layout/tile_layout.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "errors.h"
#include "layout/checked.h"

namespace tp {

namespace {

std::string iter_stride_str(const Iter& it) {
  std::string s = std::to_string(it.stride);
  if (it.axis != Axis::m) s += std::string("@") + axis_name(it.axis);
  return s;
}

// "S[8 : 1]" or "S[(32, 8) : (1@laneid, 1)]"
std::string iters_str(const char* head, const std::vector<Iter>& iters) {
  std::ostringstream os;
  os << head << "[";
  if (iters.size() == 1) {
    os << iters[0].extent << " : " << iter_stride_str(iters[0]);
  } else {
    os << "(";
    for (size_t i = 0; i < iters.size(); ++i) os << (i ? ", " : "") << iters[i].extent;
    os << ") : (";
    for (size_t i = 0; i < iters.size(); ++i) os << (i ? ", " : "") << iter_stride_str(iters[i]);
    os << ")";
  }
  os << "]";
  return os.str();
}

void check_iters(const std::vector<Iter>& iters, const char* part) {
  for (size_t k = 0; k < iters.size(); ++k) {
    const Iter& it = iters[k];
    const std::string where = std::string("layout: ") + part + " iter " + std::to_string(k) + ": ";
    if (it.extent < 1) {
      throw ValueError(where + "extent " + std::to_string(it.extent) + " must be at least 1");
    }
    if (it.stride < 0) {
      throw ValueError(where + "stride " + std::to_string(it.stride) + " must not be negative");
    }
  }
}

void check_shape(const std::vector<long long>& shape, const char* what) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 1) {
      throw ValueError(std::string("layout: ") + what + " " + shape_str(shape) + " has dim " +
                       std::to_string(d) + " of size " + std::to_string(shape[d]) +
                       "; dims must be at least 1");
    }
  }
}

}  // namespace

std::string shape_str(const std::vector<long long>& shape) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) os << ",";
  os << ")";
  return os.str();
}

void check_swizzle(long long per_element, long long swizzle_len, long long atom_len) {
  const std::string given = "swizzle: Swizzle(" + std::to_string(per_element) + ", " +
                            std::to_string(swizzle_len) + ", " + std::to_string(atom_len) + ")";
  if (per_element < 0 || swizzle_len < 0 || atom_len < 0) {
    throw ValueError(given + ": per_element, swizzle_len and atom_len must not be negative");
  }
  if (atom_len < swizzle_len) {
    throw ValueError(given + " needs atom_len >= swizzle_len (the bits it XORs in lie above the bits "
                     "it changes)");
  }
  // each part first, so that the sum of huge parts cannot wrap around
  if (per_element > kMaxSwizzleBits || swizzle_len > kMaxSwizzleBits || atom_len > kMaxSwizzleBits ||
      per_element + swizzle_len + atom_len > kMaxSwizzleBits) {
    throw ValueError(given + " needs per_element + swizzle_len + atom_len <= " +
                     std::to_string(kMaxSwizzleBits) +
                     " (it rewrites the address bits below that sum; no tile has 2**32 addresses)");
  }
}

TileLayout::TileLayout(std::vector<Iter> shard, std::vector<Iter> replica,
                       std::map<Axis, long long> offset, Swizzle swizzle)
    : shard_(std::move(shard)),
      replica_(std::move(replica)),
      offset_(std::move(offset)),
      swizzle_(swizzle) {
  check_parts();
  measure();
}

TileLayout TileLayout::padded_to(long long elements) const {
  if (elements < 1 || elements > size_) {
    throw ValueError("layout: " + str() + " names " + std::to_string(size_) + " positions; it cannot place " +
                     std::to_string(elements) + " elements");
  }
  TileLayout padded = *this;
  padded.elements_ = elements;
  return padded;
}

void TileLayout::check_parts() const {
  if (shard_.empty()) throw ValueError("layout: the shard S[...] needs at least one iter");
  if (shard_.size() > static_cast<size_t>(kMaxIters)) {
    throw ValueError("layout: at most " + std::to_string(kMaxIters) + " shard iters");
  }
  check_iters(shard_, "shard");
  check_iters(replica_, "replica");
  for (const auto& [axis, value] : offset_) {
    if (value < 0) {
      throw ValueError(std::string("layout: offset ") + std::to_string(value) + " on " + axis_name(axis) +
                       " must not be negative");
    }
  }
  check_swizzle(swizzle_.per_element, swizzle_.swizzle_len, swizzle_.atom_len);
}

// Every coordinate is the offset plus digit * stride terms with 0 <= digit < extent, all
// non-negative, so the largest one on each axis bounds every position and every partial sum
// on the way to one. Checking those maxima here is what lets the rest run unchecked.
void TileLayout::measure() {
  const auto overflow = [&](const std::string& what, const std::string& cause) {
    return ValueError("layout: " + str() + " " + what + " (" + cause + ")");
  };
  for (size_t k = 0; k < shard_.size(); ++k) {
    if (!checked_mul(size_, shard_[k].extent, size_)) {
      throw overflow("places more than 2**63 - 1 elements",
                     "shard iter " + std::to_string(k) + ": extent " + int_str(shard_[k].extent));
    }
  }
  elements_ = size_;  // unpadded (padded_to narrows it)

  std::map<Axis, long long> last = offset_;  // the largest coordinate on each axis
  const auto reach = [&](const char* part, const std::vector<Iter>& iters) {
    for (size_t k = 0; k < iters.size(); ++k) {
      const Iter& it = iters[k];
      long long& on_axis = last[it.axis];
      const long long before = on_axis;
      long long term = 0;
      if (!checked_mul(it.extent - 1, it.stride, term) || !checked_add(before, term, on_axis)) {
        throw overflow(std::string("spans more than 2**63 - 1 positions on axis ") + axis_name(it.axis),
                       std::string(part) + " iter " + std::to_string(k) + ": extent " + int_str(it.extent) +
                           ", stride " + int_str(it.stride) +
                           (before ? ", after the offset and earlier iters reach " + int_str(before)
                                   : std::string()));
      }
    }
  };
  reach("shard", shard_);
  reach("replica", replica_);

  long long last_thread = 0;
  for (const auto& [axis, value] : last) {
    if (!is_thread_axis(axis)) continue;
    long long weighted = 0;
    if (!checked_mul(value, thread_weight(axis), weighted) ||
        !checked_add(last_thread, weighted, last_thread)) {
      throw overflow("reaches thread indices beyond 2**63 - 1",
                     std::string(axis_name(axis)) + " up to " + int_str(value) + ", weight " +
                         std::to_string(thread_weight(axis)));
    }
  }

  const long long last_m = last.count(Axis::m) ? last.at(Axis::m) : 0;
  if (!checked_add(last_m, 1, span_)) {
    throw overflow("spans more than 2**63 - 1 positions on axis m", "the last is " + int_str(last_m));
  }
  if (swizzled()) {  // a swizzle permutes addresses within blocks of 2**(M + B)
    const long long block = 1ll << (swizzle_.per_element + swizzle_.swizzle_len);
    if (!checked_add(span_, block - 1, span_)) {
      throw overflow("spans more than 2**63 - 1 positions on axis m",
                     "rounded up to whole swizzle blocks of " + int_str(block));
    }
    span_ = span_ / block * block;
  }
}

TileLayout TileLayout::row_major(const std::vector<long long>& shape) {
  check_shape(shape, "row-major shape");
  std::vector<Iter> iters(shape.size());
  long long stride = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    iters[k] = Iter{shape[k], stride, Axis::m};
    if (k > 0 && !checked_mul(stride, shape[k], stride)) {
      throw ValueError("layout: row-major shape " + shape_str(shape) +
                       " has more than 2**63 - 1 elements");
    }
  }
  if (iters.empty()) iters.push_back(Iter{1, 1, Axis::m});
  return TileLayout(iters);
}

std::vector<long long> TileLayout::shape() const {
  std::vector<long long> s;
  for (const Iter& it : shard_) s.push_back(it.extent);
  return s;
}

bool TileLayout::has_thread_axes() const { return !thread_axes().empty(); }

std::vector<Axis> TileLayout::thread_axes() const {
  std::vector<Axis> axes;
  auto note = [&](Axis a) {
    if (is_thread_axis(a) && std::find(axes.begin(), axes.end(), a) == axes.end()) axes.push_back(a);
  };
  for (const Iter& it : shard_) note(it.axis);
  for (const Iter& it : replica_) note(it.axis);
  for (const auto& [axis, value] : offset_) note(axis);
  return axes;
}

TileLayout TileLayout::storage() const {
  std::vector<Iter> shard, replica;
  for (const Iter& it : shard_) {
    if (!is_thread_axis(it.axis)) shard.push_back(it);
  }
  for (const Iter& it : replica_) {
    if (!is_thread_axis(it.axis)) replica.push_back(it);
  }
  if (shard.empty()) shard.push_back(Iter{1, 1, Axis::m});
  std::map<Axis, long long> offset;
  if (offset_.count(Axis::m)) offset[Axis::m] = offset_.at(Axis::m);
  return TileLayout(shard, replica, offset, swizzle_);
}

namespace {

// Shard digits times strides, plus the offset; replica axes named at 0; no swizzle yet.
Position unswizzled_place(const std::vector<Iter>& shard, const std::vector<Iter>& replica,
                          const std::map<Axis, long long>& offset, long long flat) {
  Position pos;
  for (auto it = shard.rbegin(); it != shard.rend(); ++it) {
    pos[it->axis] += (flat % it->extent) * it->stride;
    flat /= it->extent;
  }
  for (const auto& [axis, value] : offset) pos[axis] += value;
  for (const Iter& it : replica) pos[it.axis] += 0;
  return pos;
}

}  // namespace

Position TileLayout::place(long long flat) const { return positions(flat).front(); }

long long TileLayout::copies() const {
  long long copies = 1;
  for (const Iter& r : replica_) {
    if (!checked_mul(copies, r.extent, copies) || copies > kMaxPositions) {
      throw ValueError("layout: " + str() + " copies each element to more than " +
                       int_str(kMaxPositions) + " places; the limit on the positions listed for one " +
                       "element is " + int_str(kMaxPositions));
    }
  }
  return copies;
}

std::vector<Position> TileLayout::positions(long long flat) const {
  if (flat < 0 || flat >= size_) {
    throw ValueError("index: " + std::to_string(flat) + " is outside the layout's " +
                     std::to_string(size_) + " elements");
  }
  copies();
  std::vector<Position> out = {unswizzled_place(shard_, replica_, offset_, flat)};
  for (const Iter& r : replica_) {
    std::vector<Position> next;
    for (const Position& p : out) {
      for (long long i = 0; i < r.extent; ++i) {
        Position q = p;
        q[r.axis] += i * r.stride;
        next.push_back(q);
      }
    }
    out.swap(next);
  }
  for (Position& p : out) {
    if (p.count(Axis::m)) p[Axis::m] = swizzle_address(p[Axis::m], swizzle_);
  }
  return out;
}

std::vector<DimIters> TileLayout::group(const std::vector<long long>& shape) const {
  check_shape(shape, "tile shape");
  long long elements = 1;
  for (long long d : shape) {
    if (!checked_mul(elements, d, elements)) {
      throw ValueError("layout: tile shape " + shape_str(shape) + " has more than 2**63 - 1 elements");
    }
  }
  if (elements != elements_) {
    throw ValueError("layout: " + str() + " places " + std::to_string(elements_) +
                     " elements but the tile shape " + shape_str(shape) + " has " +
                     std::to_string(elements));
  }
  std::vector<long long> extents = shape;  // the padding lies in dim 0
  if (padded()) {
    const long long inner = elements / shape[0];
    if (size_ % inner != 0) {
      throw ValueError("layout: " + str() + " pads " + std::to_string(elements_) + " elements to " +
                       std::to_string(size_) + ", which is no whole number of the tile " + shape_str(shape) +
                       "'s dim-0 slices of " + std::to_string(inner));
    }
    extents[0] = size_ / inner;
  }
  std::vector<DimIters> dims(shape.size());
  std::vector<Iter> pending(shard_.begin(), shard_.end());
  size_t next = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    long long need = extents[d];
    while (need > 1) {
      // iters of extent 1 carry no digit; skip them
      while (next < pending.size() && pending[next].extent == 1) ++next;
      Iter it = pending[next];
      if (it.extent <= need) {
        if (need % it.extent != 0) {
          throw ValueError("layout: " + str() + " cannot be split into the dims of " +
                           shape_str(shape) + " (iter extent " + std::to_string(it.extent) +
                           " does not divide dim " + std::to_string(d) + ")");
        }
        dims[d].iters.push_back(it);
        need /= it.extent;
        ++next;
      } else {
        if (it.extent % need != 0) {
          throw ValueError("layout: " + str() + " cannot be split into the dims of " +
                           shape_str(shape) + " (dim " + std::to_string(d) + " of size " +
                           std::to_string(shape[d]) + " ends inside an iter of extent " +
                           std::to_string(it.extent) + ")");
        }
        // outer part goes to this dim, inner part stays for the next dims; stride * inner
        // is below (extent - 1) * stride, which construction checked
        const long long inner = it.extent / need;
        dims[d].iters.push_back(Iter{need, it.stride * inner, it.axis});
        pending[next] = Iter{inner, it.stride, it.axis};
        need = 1;
      }
    }
  }
  for (DimIters& dim : dims) {
    for (const Iter& it : dim.iters) {
      (is_thread_axis(it.axis) ? dim.thread_extent : dim.local_extent) *= it.extent;
    }
  }
  return dims;
}

MemLayout TileLayout::memory_layout() const {
  if (has_thread_axes()) {
    throw ValueError("layout: " + str() + " uses thread axes; a memory tile is addressed by m only");
  }
  MemLayout L{};
  L.n = static_cast<int>(shard_.size());
  for (size_t k = 0; k < shard_.size(); ++k) {
    L.extent[k] = shard_[k].extent;
    L.stride[k] = shard_[k].stride;
  }
  L.offset = offset_.count(Axis::m) ? offset_.at(Axis::m) : 0;
  L.swizzle = swizzle_;
  return L;
}

std::string TileLayout::str() const {
  std::string s = iters_str("S", shard_);
  if (!replica_.empty()) s += " + " + iters_str("R", replica_);
  for (const auto& [axis, value] : offset_) {
    if (value == 0) continue;
    s += " + " + std::to_string(value);
    if (axis != Axis::m) s += std::string("@") + axis_name(axis);
  }
  if (swizzled()) {
    s += " swizzled(" + std::to_string(swizzle_.per_element) + ", " +
         std::to_string(swizzle_.swizzle_len) + ", " + std::to_string(swizzle_.atom_len) + ")";
  }
  if (padded()) s += " padded(" + std::to_string(elements_) + ")";
  return s;
}

bool TileLayout::operator==(const TileLayout& o) const {
  auto nonzero = [](const std::map<Axis, long long>& m) {
    std::map<Axis, long long> r;
    for (const auto& [k, v] : m) {
      if (v) r[k] = v;
    }
    return r;
  };
  return shard_ == o.shard_ && replica_ == o.replica_ && nonzero(offset_) == nonzero(o.offset_) &&
         swizzle_.per_element == o.swizzle_.per_element &&
         swizzle_.swizzle_len == o.swizzle_.swizzle_len && swizzle_.atom_len == o.swizzle_.atom_len &&
         elements_ == o.elements_;
}

size_t TileLayout::hash() const {
  size_t h = 0;
  auto mix = [&h](long long v) { h ^= std::hash<long long>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  for (const std::vector<Iter>* iters : {&shard_, &replica_}) {
    mix(static_cast<long long>(iters->size()));
    for (const Iter& it : *iters) {
      mix(it.extent);
      mix(it.stride);
      mix(static_cast<long long>(it.axis));
    }
  }
  for (const auto& [axis, value] : offset_) {
    if (value) {  // a zero offset is no offset (operator==)
      mix(static_cast<long long>(axis));
      mix(value);
    }
  }
  mix(swizzle_.per_element);
  mix(swizzle_.swizzle_len);
  mix(swizzle_.atom_len);
  mix(elements_);
  return h;
}

}  // namespace tp
