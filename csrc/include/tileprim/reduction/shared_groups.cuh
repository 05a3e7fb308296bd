// reduction -> shared at warp / warpgroup / cta scope. The working threads form groups of
// `group_size` lanes (a power of two, never straddling a warp); group g reduces outputs
// g, g + groups, g + 2*groups, ... Lane l of a group gathers sources l, l+G, l+2G, ..., the
// group folds with an XOR butterfly of width G, and lane 0 writes (with accum: op(old, new)).
// Threads past the last whole group idle; the caller syncs afterwards.
#pragma once
#include "butterfly.cuh"
#include "ops.cuh"
#include "view.cuh"

namespace tp {

struct GroupShape {
  int group_size;
  int groups;
  ShuffleMasks masks;  // 1, 2, 4, ... < group_size, width group_size
};

template <class Op, class T, class Lanes, class View>
TP_HD void shared_groups_fold(const Lanes& g, T* dst, const T* src, const View& v, const GroupShape& s,
                              bool accum) {
  const int G = s.group_size;
  const int steps = (v.spatial + s.groups - 1) / s.groups;
  for (int step = 0; step < steps; ++step) {
    auto part = g.map([&](int t) {
      const int out = step * s.groups + t / G;
      T acc = Op::template identity<T>();
      if (out < v.spatial) {
        for (int j = t % G; j < v.reduce; j += G) acc = Op::apply(acc, src[v.src_slot(out, j)]);
      }
      return acc;
    });
    auto total = butterfly<Op>(g, part, s.masks);
    g.each([&](int t) {
      const int out = step * s.groups + t / G;
      if (out < v.spatial && t % G == 0) {
        T& d = dst[v.dst_slot(out)];
        const T r = g.at(total, t);
        d = accum ? Op::apply(d, r) : r;
      }
    });
  }
}

template <class Op, class T, class Lanes, class View>
TP_HD void shared_group_reduce(const Lanes& all, T* dst, const T* src, const View& v,
                               const GroupShape& s, bool accum) {
  all.first(s.groups * s.group_size, [&](const auto& g) { shared_groups_fold<Op>(g, dst, src, v, s, accum); });
}

}  // namespace tp
