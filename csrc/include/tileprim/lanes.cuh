// The lane group: the one interface through which an algorithm's threads talk to each
// other. Algorithms are written against it, as per-lane lambdas joined by collective steps:
//
//   auto v = g.map([&](int lane) { ... return value; });   // every lane computes a value
//   v = g.zip(v, g.shfl_xor(v, mask, width), op);          // lanes exchange and combine
//   g.each([&](int lane) { ... g.at(v, lane) ... });        // every lane consumes its value
//   T* r = g.regs(base, stride, lane);                      // a lane's register file
//   g.first(n, [&](const auto& w) { ... });                 // only lanes 0..n-1 take part
//
// On the GPU (DeviceLanes, below) a value is the calling thread's own scalar and the lane
// is its index in the scope instance. The CPU backend's HostLanes runs all lanes of an
// instance in lockstep, a value there being one scalar per lane; shuffles permute them.
#pragma once
#include "config.cuh"
#include "reduction/butterfly.cuh"

namespace tp {

#if TP_ON_DEVICE
struct DeviceLanes {
  int lane;  // this thread's index within its scope instance

  template <class F> TP_HD auto map(F f) const { return f(lane); }
  template <class F> TP_HD void each(F f) const { f(lane); }
  template <class V> TP_HD const V& at(const V& v, int) const { return v; }
  template <class R> TP_HD R regs(R base, int, int) const { return base; }
  template <class V, class F> TP_HD V zip(const V& a, const V& b, F f) const { return f(a, b); }
  template <class F> TP_HD void first(int n, F f) const {
    if (lane < n) f(*this);
  }

  // Butterfly exchange inside aligned groups of `width` lanes; the member mask names just
  // this thread's group, so groups of one warp shuffle independently (full mask at 32).
  template <class T> TP_HD T shfl_xor(const T& v, int lane_mask, int width) const {
    const unsigned members =
        width >= 32 ? 0xffffffffu : ((1u << width) - 1u) << ((lane & 31) & ~(width - 1));
    return __shfl_xor_sync(members, v, lane_mask, width);
  }
  // the partials of several warps: only a CTA's lanes span them (CtaLanes), and the planner gives
  // ShuffleMasks::warps to no other scope
  template <class Op, class T> __device__ T fold_warps(const T& v, int) const {
    __trap();
    return v;
  }
};

// The barrier of scope instance `instance` of a block of kInstances (bar.sync 1 + instance over its
// kThreads; whole warps, so each warp takes one branch). The id is an immediate: with an id in a
// register ptxas reserves all 16 of a block's named barriers (EIATTR_NUM_BARRIERS), and an sm_90
// SM, 64 for its blocks together, then holds at most 4 blocks.
template <int kThreads, int kInstances, int kId = 0> __device__ __forceinline__ void instance_sync(int instance) {
  static_assert(kInstances <= 15, "a block has 16 named barriers, 0 for __syncthreads");
  if constexpr (kId + 1 == kInstances) {
    asm volatile("bar.sync %0, %1;" ::"n"(1 + kId), "n"(kThreads) : "memory");
  } else if (instance == kId) {
    asm volatile("bar.sync %0, %1;" ::"n"(1 + kId), "n"(kThreads) : "memory");
  } else {
    instance_sync<kThreads, kInstances, kId + 1>(instance);
  }
}

// The lanes of a scope instance of several warps (warpgroup, CTA): within a warp they shuffle;
// across warps (lane masks of 32 and more) each value goes through shared memory between two of
// the instance's barriers (bar.sync 1 + instance, or __syncthreads for a lone CTA instance, as
// the frames sync). Every lane of the instance must make every exchange.
template <int kThreads, int kInstances> struct CtaLanes : DeviceLanes {
  int instance;

  __device__ __forceinline__ void sync() const {
    if constexpr (kInstances == 1) {
      __syncthreads();
    } else {
      instance_sync<kThreads, kInstances>(instance);
    }
  }
  template <class T> __device__ T shfl_xor(const T& v, int lane_mask, int width) const {
    if (lane_mask < 32) return DeviceLanes::shfl_xor(v, lane_mask, width < 32 ? width : 32);
    T* mine = published(v);
    return mine[lane ^ lane_mask];
  }
  // lane l folds lanes l % 32, l % 32 + 32, ... of `warps` warps in that order (ShuffleMasks::warps)
  template <class Op, class T> __device__ T fold_warps(const T& v, int warps) const {
    const T* mine = published(v);
    T acc = mine[lane & 31];
    for (int w = 1; w < warps; ++w) acc = Op::apply(acc, mine[(lane & 31) + 32 * w]);
    return acc;
  }

 private:
  // every lane's v in the instance's exchange buffer, readable by all once it returns
  template <class T> __device__ T* published(const T& v) const {
    __shared__ __align__(16) unsigned char exchange[kThreads * kInstances * sizeof(T)];
    T* mine = reinterpret_cast<T*>(exchange) + instance * kThreads;
    sync();  // the last exchange's readers are done
    mine[lane] = v;
    sync();
    return mine;
  }
};

// ---- thread-block clusters (sm_90 and later) ---------------------------------------------------
// The cluster barrier: every thread of every CTA of the cluster arrives (its shared-memory writes
// released) and waits (the peers' acquired). All threads of a warp pass it together (.aligned).
__device__ __forceinline__ void cluster_sync() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
  __trap();  // the planner accepts a cluster scope only on targets that have clusters
#endif
}

// `p` (this CTA's shared memory) in CTA `rank` of the cluster, read there (distributed shared memory).
template <class T> __device__ __forceinline__ T load_from_cta(const T* p, int rank) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "a lane's value is 2, 4 or 8 bytes");
  T out;
#if __CUDA_ARCH__ >= 900
  const unsigned local = static_cast<unsigned>(__cvta_generic_to_shared(p));
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  if constexpr (sizeof(T) == 8) {
    unsigned long long w;
    asm volatile("ld.shared::cluster.b64 %0, [%1];" : "=l"(w) : "r"(remote) : "memory");
    memcpy(&out, &w, sizeof out);
  } else if constexpr (sizeof(T) == 4) {
    unsigned w;
    asm volatile("ld.shared::cluster.b32 %0, [%1];" : "=r"(w) : "r"(remote) : "memory");
    memcpy(&out, &w, sizeof out);
  } else {
    unsigned short w;
    asm volatile("ld.shared::cluster.b16 %0, [%1];" : "=h"(w) : "r"(remote) : "memory");
    memcpy(&out, &w, sizeof out);
  }
#else
  (void)rank;
  out = *p;
  __trap();
#endif
  return out;
}

// The lanes of a cluster instance: kCtas CTAs of kCtaThreads threads (a power of two), lane =
// rank * kCtaThreads + thread. The same butterfly as HostLanes with kCtas * kCtaThreads lanes:
// masks below 32 shuffle within the warp, below kCtaThreads go through the CTA's shared memory (as
// CtaLanes), and the others read the partner's value from its CTA (rank (lane ^ mask) / kCtaThreads,
// the same thread index, as the mask is a multiple of kCtaThreads) through distributed shared memory.
//
// One cluster barrier per exchange suffices because the exchange buffer is doubled and the lanes
// alternate between its halves (`phase`, one counter per thread that every lane advances alike, as
// every lane makes every exchange): a lane writes half h at exchange k only after passing barrier
// k - 1, which every peer reached only after its reads of half h at exchange k - 2 were done. The
// kernel ends with a cluster barrier too, so that no CTA exits while a peer may still read it.
//
// A whole-row butterfly (masks 1, 2, 4, ... through every bit of a CTA's threads, then the CTAs')
// leaves every lane of a CTA with the same partial before the masks across CTAs (partners agree
// bit for bit: the fold is commutative), so those take ONE exchange: each CTA publishes its
// partial, and every lane reads all kCtas of them and folds them as the butterfly would, stage by
// stage, for every rank (new[r] = op(old[r], old[r ^ bit]), the lane's own first, as each lane of
// the butterfly folds), keeping its own rank's: the same bits, one cluster barrier instead of
// log2(kCtas).
template <int kCtaThreads, int kCtas> struct ClusterLanes : DeviceLanes {
  static_assert((kCtaThreads & (kCtaThreads - 1)) == 0, "a cluster's partners lie whole CTAs apart");
  int& phase;  // exchanges made so far (the kernel's one counter)

  template <class T> __device__ T shfl_xor(const T& v, int lane_mask, int width) const {
    const int tid = lane % kCtaThreads;
    if (lane_mask < kCtaThreads) {
      return CtaLanes<kCtaThreads, 1>{{tid}, 0}.shfl_xor(v, lane_mask, width < kCtaThreads ? width : kCtaThreads);
    }
    __shared__ __align__(16) unsigned char exchange[2 * kCtaThreads * sizeof(T)];
    T* const half = reinterpret_cast<T*>(exchange) + (phase & 1) * kCtaThreads;
    ++phase;
    half[tid] = v;
    cluster_sync();
    return load_from_cta(half + tid, (lane ^ lane_mask) / kCtaThreads);
  }

  static constexpr int log2(int x) { return x <= 1 ? 0 : 1 + log2(x / 2); }

  template <class Op, class T> __device__ T butterfly(T v, const ShuffleMasks& sh) const {
    // a whole-row butterfly: masks 1, 2, 4, ... through every bit of the cluster's lanes, in order
    constexpr int kWithin = log2(kCtaThreads), kAcross = log2(kCtas);
    bool whole = sh.count == kWithin + kAcross;
    for (int i = 0; i < sh.count; ++i) whole = whole && sh.mask[i] == 1 << i;
    if (!whole) return butterfly_steps<Op>(*this, v, sh);
#pragma unroll
    for (int i = 0; i < kWithin; ++i) v = Op::apply(v, shfl_xor(v, 1 << i, sh.width));
    __shared__ __align__(16) unsigned char exchange[2 * sizeof(T)];
    T* const half = reinterpret_cast<T*>(exchange) + (phase & 1);
    ++phase;
    if (lane % kCtaThreads == 0) *half = v;
    cluster_sync();
    // part[k]: rank (k ^ this CTA's rank)'s, so that this rank's is part[0] and every index a constant
    // (the butterfly's stages look the same under that relabelling: (k ^ r) ^ bit = (k ^ bit) ^ r)
    const int rank = lane / kCtaThreads;
    T part[kCtas];
#pragma unroll
    for (int k = 0; k < kCtas; ++k) part[k] = load_from_cta(half, k ^ rank);
#pragma unroll
    for (int i = 0; i < kAcross; ++i) {
      const int bit = 1 << i;
      T next[kCtas];
#pragma unroll
      for (int k = 0; k < kCtas; ++k) next[k] = Op::apply(part[k], part[k ^ bit]);
#pragma unroll
      for (int k = 0; k < kCtas; ++k) part[k] = next[k];
    }
    return part[0];
  }
};
#endif

}  // namespace tp
