// HostLanes: the lockstep lane group of the CPU backend (see tileprim/lanes.cuh). All lanes
// of one scope instance advance together, so a collective step sees every lane's value at
// once, exactly as a converged warp does.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace tp {

struct HostLanes {
  int n;  // lanes running in lockstep

  template <class F> auto map(F f) const {
    std::vector<decltype(f(0))> v(static_cast<size_t>(n));
    for (int l = 0; l < n; ++l) v[l] = f(l);
    return v;
  }
  template <class F> void each(F f) const {
    for (int l = 0; l < n; ++l) f(l);
  }
  template <class V> const V& at(const std::vector<V>& v, int lane) const { return v[lane]; }
  template <class T> T* regs(T* base, int stride, int lane) const { return base + static_cast<size_t>(lane) * stride; }
  template <class V, class F> std::vector<V> zip(const std::vector<V>& a, const std::vector<V>& b, F f) const {
    std::vector<V> out(a.size());
    for (size_t l = 0; l < a.size(); ++l) out[l] = f(a[l], b[l]);
    return out;
  }
  template <class F> void first(int count, F f) const { f(HostLanes{count < n ? count : n}); }
  // __shfl_xor_sync within aligned groups of `width` lanes: lane l reads lane l ^ mask.
  template <class T> std::vector<T> shfl_xor(const std::vector<T>& v, int lane_mask, int width) const {
    std::vector<T> out(v.size());
    for (int l = 0; l < n; ++l) {
      const int src = l ^ lane_mask;
      if (lane_mask >= width || src >= n) {
        throw std::logic_error("shfl_xor: lane " + std::to_string(l) + " reads lane " + std::to_string(src) +
                               " outside its group");
      }
      out[l] = v[src];
    }
    return out;
  }
  // CtaLanes::fold_warps: lane l folds lanes l % 32, l % 32 + 32, ... of `warps` warps in order
  template <class Op, class T> std::vector<T> fold_warps(const std::vector<T>& v, int warps) const {
    if (warps * 32 != n) throw std::logic_error("fold_warps: " + std::to_string(warps) + " warps of " + std::to_string(n) + " lanes");
    std::vector<T> out(v.size());
    for (int l = 0; l < n; ++l) {
      T acc = v[l & 31];
      for (int w = 1; w < warps; ++w) acc = Op::apply(acc, v[(l & 31) + 32 * w]);
      out[l] = acc;
    }
    return out;
  }
};

}  // namespace tp
