// gather -> gather: take_along_axis and its derivative, scatter_add_along_axis, on shared tiles.
// Both index one tile by another tile's values along one axis (NumPy's take_along_axis: out[..., j,
// ...] = x[..., idx[..., j, ...], ...]), so every thread may read any element: the tiles lie in
// shared memory, where the instance's threads take the results' elements in turn (element e by
// lane e mod threads). An index i counts from the end where it is negative (-n <= i < 0), as
// NumPy's; one outside [-n, n) reads nothing: take gives NaN there, scatter adds nothing.
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

// out (x's shape) = +0 plus, in idx's order along the axis, every src whose index points at the
// element: the vector-Jacobian product of take_along_axis (torch's scatter_add into zeros), each
// element's sum in one order on every backend.
template <class Lanes, class T, class I>
TP_HD void scatter_add_along_axis(const Lanes& g, int threads, T* out, const I* idx, const T* src,
                                  const GatherView& v) {
  const long long elements = v.outer * v.extent * v.inner;
  g.each([&](int lane) {
    for (long long e = lane; e < elements; e += threads) {
      const long long row = e / (v.extent * v.inner), at = (e / v.inner) % v.extent, in = e % v.inner;
      T sum = cast<T>(0.0f);
      for (long long j = 0; j < v.picks; ++j) {
        const long long k = (row * v.picks + j) * v.inner + in;
        if (position_of(idx[memory_offset(v.idx, k)], v.extent) == at) sum = add(sum, src[memory_offset(v.src, k)]);
      }
      out[memory_offset(v.out, e)] = sum;
    }
  });
}

}  // namespace tp
