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
};

template <class Op, class Lanes, class V>
TP_HD V butterfly(const Lanes& g, V v, const ShuffleMasks& sh) {
  TP_UNROLL
  for (int i = 0; i < sh.count; ++i) {
    v = g.zip(v, g.shfl_xor(v, sh.mask[i], sh.width), [](auto a, auto b) { return Op::apply(a, b); });
  }
  return v;
}

}  // namespace tp
