#include "layout/tile_layout.h"

#include <algorithm>
#include <sstream>

#include "errors.h"

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
  for (const Iter& it : iters) {
    if (it.extent < 1) {
      throw ValueError(std::string("layout: ") + part + " extent " + std::to_string(it.extent) +
                       " must be at least 1");
    }
    if (it.stride < 0) {
      throw ValueError(std::string("layout: ") + part + " stride " + std::to_string(it.stride) +
                       " must not be negative");
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

TileLayout::TileLayout(std::vector<Iter> shard, std::vector<Iter> replica,
                       std::map<Axis, long long> offset, Swizzle swizzle)
    : shard_(std::move(shard)),
      replica_(std::move(replica)),
      offset_(std::move(offset)),
      swizzle_(swizzle) {
  if (shard_.empty()) throw ValueError("layout: the shard S[...] needs at least one iter");
  if (shard_.size() > static_cast<size_t>(kMaxIters)) {
    throw ValueError("layout: at most " + std::to_string(kMaxIters) + " shard iters");
  }
  check_iters(shard_, "shard");
  check_iters(replica_, "replica");
  for (const auto& [axis, value] : offset_) {
    if (value < 0) {
      throw ValueError(std::string("layout: offset on ") + axis_name(axis) + " must not be negative");
    }
  }
  if (swizzle_.swizzle_len < 0 || swizzle_.per_element < 0 || swizzle_.atom_len < swizzle_.swizzle_len) {
    throw ValueError("swizzle: needs per_element >= 0, swizzle_len >= 0 and atom_len >= swizzle_len");
  }
}

TileLayout TileLayout::row_major(const std::vector<long long>& shape) {
  std::vector<Iter> iters;
  long long stride = 1;
  for (auto it = shape.rbegin(); it != shape.rend(); ++it) {
    iters.insert(iters.begin(), Iter{*it, stride, Axis::m});
    stride *= *it;
  }
  if (iters.empty()) iters.push_back(Iter{1, 1, Axis::m});
  return TileLayout(iters);
}

long long TileLayout::size() const {
  long long n = 1;
  for (const Iter& it : shard_) n *= it.extent;
  return n;
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

long long TileLayout::span() const {
  long long last = offset_.count(Axis::m) ? offset_.at(Axis::m) : 0;
  for (const Iter& it : shard_) {
    if (!is_thread_axis(it.axis)) last += (it.extent - 1) * it.stride;
  }
  for (const Iter& it : replica_) {
    if (!is_thread_axis(it.axis)) last += (it.extent - 1) * it.stride;
  }
  long long span = last + 1;
  if (swizzled()) {
    const long long block = 1ll << (swizzle_.per_element + swizzle_.swizzle_len);
    span = (span + block - 1) / block * block;
  }
  return span;
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

std::vector<Position> TileLayout::positions(long long flat) const {
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
  long long elements = 1;
  for (long long d : shape) elements *= d;
  if (elements != size()) {
    throw ValueError("layout: " + str() + " places " + std::to_string(size()) +
                     " elements but the tile shape " + shape_str(shape) + " has " +
                     std::to_string(elements));
  }
  std::vector<DimIters> dims(shape.size());
  std::vector<Iter> pending(shard_.begin(), shard_.end());
  size_t next = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    long long need = shape[d];
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
        // outer part goes to this dim, inner part stays for the next dims
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
         swizzle_.swizzle_len == o.swizzle_.swizzle_len && swizzle_.atom_len == o.swizzle_.atom_len;
}

}  // namespace tp
