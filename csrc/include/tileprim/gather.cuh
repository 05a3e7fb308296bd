// gather -> gather: take_along_axis and its derivative, scatter_add_along_axis. Both index one tile
// by another tile's values along one axis (NumPy's take_along_axis: out[..., j, ...] = x[...,
// idx[..., j, ...], ...]). The index tile and the small side (take's result, scatter's src) lie in
// shared memory, where every thread reads them; the wide side (take's x, scatter's result) lies
// there too, its elements taken by the instance's threads in turn (element e by lane e mod
// threads), or stays in the threads' registers where a program holds it (a row spread over them):
// then each thread takes the elements of its own slots (`Place`: which slot holds which element;
// take reads each element where it is written back, once). An index i counts from the end where
// it is negative (-n <= i < 0), as NumPy's; one outside [-n, n) reads nothing: take gives NaN
// there, scatter adds nothing.
#pragma once
#include "layout.cuh"
#include "numeric.cuh"

namespace tp {

// The tiles' shapes, row-major around the axis: `outer` rows of `extent` (x's extent along the
// axis) or `picks` (idx's) by `inner` (the dims after the axis); with each tile's memory layout.
struct GatherView {
  long long outer, extent, picks, inner;
  MemLayout x, idx, src, out;  // src: scatter's values (idx's shape); unused by take
};

// The index as a position along the axis, or -1 outside [-n, n).
template <class I> TP_HD long long position_of(I i, long long n) {
  const long long at = static_cast<long long>(i);
  return at < -n || at >= n ? -1 : at < 0 ? at + n : at;
}

// out (idx's shape) = x at idx along the axis, NaN where the index lies outside the row.
template <class Lanes, class T, class I>
TP_HD void take_along_axis(const Lanes& g, int threads, T* out, const T* x, const I* idx, const GatherView& v) {
  const long long elements = v.outer * v.picks * v.inner;
  g.each([&](int lane) {
    for (long long e = lane; e < elements; e += threads) {
      const long long row = e / (v.picks * v.inner), in = e % v.inner;
      const long long at = position_of(idx[memory_offset(v.idx, e)], v.extent);
      out[memory_offset(v.out, e)] =
          at < 0 ? limits<T>::quiet_nan() : x[memory_offset(v.x, (row * v.extent + at) * v.inner + in)];
    }
  });
}

// The same with x in the threads' registers (`slots` per thread, `stride` apart on the host): each
// element is read in the slot that writes it back, by the one thread holding it there; the picks
// outside their row are NaN, written by lane k mod threads.
template <int kUnroll, class Lanes, class Place, class T, class I>
TP_HD void take_along_axis(const Lanes& g, const Place& place, int threads, int slots, T* out, const T* x, int stride,
                           const I* idx, const GatherView& v) {
  const long long picked = v.outer * v.picks * v.inner;
  g.each([&](int lane) {
    const T* held = g.regs(x, stride, lane);
    TP_UNROLL_BY(kUnroll)
    for (int s = 0; s < slots; ++s) {
      const long long e = place.store_element(lane, s);
      if (e < 0) continue;
      const long long row = e / (v.extent * v.inner), at = (e / v.inner) % v.extent, in = e % v.inner;
      for (long long j = 0; j < v.picks; ++j) {
        const long long k = (row * v.picks + j) * v.inner + in;
        if (position_of(idx[memory_offset(v.idx, k)], v.extent) == at) out[memory_offset(v.out, k)] = held[s];
      }
    }
    for (long long k = lane; k < picked; k += threads) {
      if (position_of(idx[memory_offset(v.idx, k)], v.extent) < 0) out[memory_offset(v.out, k)] = limits<T>::quiet_nan();
    }
  });
}

// The same with x read where it lies in global memory (a program's input, never staged: one load
// per pick, where a staged row would copy all of it for one element) and idx and out in the
// threads' registers, every thread holding element k in slot k: each thread loads its own picks
// (a warp's lanes read one address, one transaction). A pick outside its row loads nothing.
template <int kUnroll, class Lanes, class T, class I>
TP_HD void take_along_axis_global(const Lanes& g, T* out, int out_stride, const T* x, const I* idx, int idx_stride,
                                  int picked, const GatherView& v) {
  g.each([&](int lane) {
    T* mine = g.regs(out, out_stride, lane);
    const I* at_k = g.regs(idx, idx_stride, lane);
    TP_UNROLL_BY(kUnroll)
    for (int k = 0; k < picked; ++k) {
      const long long row = k / (v.picks * v.inner), in = k % v.inner;
      const long long at = position_of(at_k[k], v.extent);
      mine[k] = at < 0 ? limits<T>::quiet_nan() : x[memory_offset(v.x, (row * v.extent + at) * v.inner + in)];
    }
  });
}

// Element e of scatter_add_along_axis's result: +0 plus, in idx's order along the axis, every src
// whose index points at it (torch's scatter_add into zeros), one order on every backend.
template <class T, class I>
TP_HD T scattered_sum(long long e, const I* idx, const T* src, const GatherView& v) {
  const long long row = e / (v.extent * v.inner), at = (e / v.inner) % v.extent, in = e % v.inner;
  T sum = cast<T>(0.0f);
  for (long long j = 0; j < v.picks; ++j) {
    const long long k = (row * v.picks + j) * v.inner + in;
    if (position_of(idx[memory_offset(v.idx, k)], v.extent) == at) sum = add(sum, src[memory_offset(v.src, k)]);
  }
  return sum;
}

// out (x's shape) = the scattered sums: the vector-Jacobian product of take_along_axis.
template <class Lanes, class T, class I>
TP_HD void scatter_add_along_axis(const Lanes& g, int threads, T* out, const I* idx, const T* src,
                                  const GatherView& v) {
  const long long elements = v.outer * v.extent * v.inner;
  g.each([&](int lane) {
    for (long long e = lane; e < elements; e += threads) out[memory_offset(v.out, e)] = scattered_sum(e, idx, src, v);
  });
}

// The same into the threads' registers: each slot its element's sum (replicas too); a slot
// holding no element NaN, as the frames stage one.
template <int kUnroll, class Lanes, class Place, class T, class I>
TP_HD void scatter_add_along_axis(const Lanes& g, const Place& place, int slots, T* out, int stride, const I* idx,
                                  const T* src, const GatherView& v) {
  g.each([&](int lane) {
    T* held = g.regs(out, stride, lane);
    TP_UNROLL_BY(kUnroll)
    for (int s = 0; s < slots; ++s) {
      const long long e = place.load_element(lane, s);
      held[s] = e < 0 ? limits<T>::quiet_nan() : scattered_sum(e, idx, src, v);
    }
  });
}

// scatter_held: one index and one value into a row (a label's one-hot), every thread holding both.
// Element e is scattered_sum's: +0 plus the value where e is the index's position `at`
// (position_of, -1 outside the row), else +0; the position and the sum found once, not per element.
template <class T> TP_HD T scattered_one(long long e, long long at, T summed) {
  return e == at ? summed : cast<T>(0.0f);
}

// Into the threads' registers (`slots` per thread; idx and src `idx_stride` and `src_stride`
// slots apart on the host, each thread's own copies).
template <int kUnroll, class Lanes, class Place, class T, class I>
TP_HD void scatter_one_held(const Lanes& g, const Place& place, int slots, T* out, int stride, const I* idx,
                            int idx_stride, const T* src, int src_stride, long long extent) {
  g.each([&](int lane) {
    T* held = g.regs(out, stride, lane);
    const long long at = position_of(g.regs(idx, idx_stride, lane)[0], extent);
    const T summed = add(cast<T>(0.0f), g.regs(src, src_stride, lane)[0]);
    TP_UNROLL_BY(kUnroll)
    for (int s = 0; s < slots; ++s) {
      const long long e = place.load_element(lane, s);
      held[s] = e < 0 ? limits<T>::quiet_nan() : scattered_one(e, at, summed);
    }
  });
}

}  // namespace tp
