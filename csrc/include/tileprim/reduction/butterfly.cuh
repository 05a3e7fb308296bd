// XOR butterfly: after the steps every lane of a group holds op over the whole group.
// Each step combines (mine, partner's); op is commutative, so partners agree bit for bit.
#pragma once
#include "../config.cuh"

namespace tp {

// Lane-xor masks of one reduction, applied in order, within aligned groups of `width` (up to
// 16384 lanes, a cluster of 16 CTAs of 1024: masks past 31 cross warps, which CtaLanes exchanges
// through shared memory, and masks past a CTA's threads cross CTAs, which ClusterLanes exchanges
// through the cluster's distributed shared memory).
constexpr int kMaxShuffleMasks = 14;
struct ShuffleMasks {
  int count;
  int mask[kMaxShuffleMasks];
  int width;
  // more than 1: a row over a CTA of whole warps that are no power of two (96, 192, ... threads), which
  // no XOR butterfly spans: after the masks (1 ... 16), the warps' partials folded in order, warp 0's
  // first, by every lane (the lane group's fold_warps)
  int warps = 0;
};

// Masks [from, sh.count) of the butterfly.
template <class Op, class Lanes, class V>
TP_HD V butterfly_steps(const Lanes& g, V v, const ShuffleMasks& sh, int from = 0) {
  TP_UNROLL
  for (int i = from; i < sh.count; ++i) {
    v = g.zip(v, g.shfl_xor(v, sh.mask[i], sh.width), [](auto a, auto b) { return Op::apply(a, b); });
  }
  return v;
}

// A lane group with a butterfly of its own (tp::ClusterLanes: the same bits, fewer barriers) runs it.
template <class Op, class Lanes, class V>
TP_HD auto butterfly_by(const Lanes& g, V v, const ShuffleMasks& sh, int) -> decltype(g.template butterfly<Op>(v, sh)) {
  return g.template butterfly<Op>(v, sh);
}
template <class Op, class Lanes, class V> TP_HD V butterfly_by(const Lanes& g, V v, const ShuffleMasks& sh, long) {
  return butterfly_steps<Op>(g, v, sh);
}

template <class Op, class Lanes, class V>
TP_HD V butterfly(const Lanes& g, V v, const ShuffleMasks& sh) {
  v = butterfly_by<Op>(g, v, sh, 0);
  return sh.warps > 1 ? g.template fold_warps<Op>(v, sh.warps) : v;
}

}  // namespace tp
