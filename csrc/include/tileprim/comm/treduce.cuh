// TREDUCE: every rank's tensor folded into the root's dst, element by element, in one fixed
// order: the root's value first, then the other ranks ascending. The fold is written once
// here; the CPU backend's chunk pipeline and the GPU kernel both call it, so every algorithm,
// backend and chunking gives the same bits.
//
// Tensors are 5-D views (outer dims 0..2, rows = dim 3, cols = dim 4) with element strides;
// every rank shares the sources' strides, dst has its own. They are cut into chunks of
// (tile_rows x tile_cols), the last ones partial, and each chunk into pieces of whole rows:
// the unit of work a CTA (or a CPU thread) takes.
#pragma once
#include "../numeric.cuh"
#include "../reduction/ops.cuh"

namespace tp {

namespace treduce {

constexpr int kDims = 5;

// The accumulator's view of an element (its own dtype, or float for accumulate="float32") and
// back: exact both ways when Acc is T; one rounding to T at the end otherwise.
template <class Acc> struct Accumulator {
  static TP_HD Acc from(Acc x) { return x; }
  template <class T> static TP_HD Acc from(T x) { return cast<Acc>(x); }
  template <class T> static TP_HD T to(Acc x) { return cast<T>(x); }
};

// The fold's three steps: start from the root's value, fold in the next rank's, finish as T.
template <class Op, class Acc> struct Step {
  template <class T> static TP_HD Acc first(T root) { return Accumulator<Acc>::from(root); }
  template <class T> static TP_HD Acc next(Acc acc, T value) { return Op::apply(acc, Accumulator<Acc>::from(value)); }
  template <class T> static TP_HD T last(Acc acc) { return Accumulator<Acc>::template to<T>(acc); }
};

// One element of dst from the ranks' values, read by `value(k)` for k = 0 (the root) .. ranks - 1
// in fold order.
template <class Op, class Acc, class T, class Value>
TP_HD T fold(int ranks, const Value& value) {
  using S = Step<Op, Acc>;
  Acc acc = S::first(value(0));
  for (int k = 1; k < ranks; ++k) acc = S::next(acc, value(k));
  return S::template last<T>(acc);
}

struct Geometry {
  long long shape[kDims];
  long long src[kDims];  // element strides of every source
  long long dst[kDims];  // element strides of dst
  long long tile_rows, tile_cols;
  long long row_chunks, col_chunks;  // per outer index
  long long rows_per_piece;          // a piece is this many rows of one chunk (or fewer, at its end)
  long long pieces_per_chunk;

  TP_HD long long outer() const { return shape[0] * shape[1] * shape[2]; }
  TP_HD long long chunks() const { return outer() * row_chunks * col_chunks; }
  TP_HD long long pieces() const { return chunks() * pieces_per_chunk; }
};

// Where one piece lies: its first element in the sources and in dst, its rows and its cols.
struct Piece {
  long long src, dst;  // element offsets of (row 0, col 0)
  long long rows, cols;
};

TP_HD Piece locate(const Geometry& g, long long piece) {
  const long long chunk = piece / g.pieces_per_chunk, part = piece % g.pieces_per_chunk;
  long long cc = chunk % g.col_chunks, rest = chunk / g.col_chunks;
  const long long rc = rest % g.row_chunks;
  long long outer = rest / g.row_chunks;
  Piece p{0, 0, 0, 0};
  for (int d = 2; d >= 0; --d) {
    const long long i = outer % g.shape[d];
    outer /= g.shape[d];
    p.src += i * g.src[d];
    p.dst += i * g.dst[d];
  }
  const long long chunk_rows = g.shape[3] - rc * g.tile_rows < g.tile_rows ? g.shape[3] - rc * g.tile_rows : g.tile_rows;
  const long long row0 = rc * g.tile_rows + part * g.rows_per_piece;
  const long long col0 = cc * g.tile_cols;
  const long long left = rc * g.tile_rows + chunk_rows - row0;
  p.rows = left < g.rows_per_piece ? left : g.rows_per_piece;
  p.cols = g.shape[4] - col0 < g.tile_cols ? g.shape[4] - col0 : g.tile_cols;
  if (p.rows < 0) p.rows = 0;
  p.src += row0 * g.src[3] + col0 * g.src[4];
  p.dst += row0 * g.dst[3] + col0 * g.dst[4];
  return p;
}

}  // namespace treduce
}  // namespace tp
