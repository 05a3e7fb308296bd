// elementwise -> reg: every thread applies the op to each register of its bundle (the
// slots its layout gives it). Operands are register arrays or scalars broadcast to all.
// The op table (csrc/ops/op_table.cc) names each map functor here by its C++ name.
#pragma once
#include "../numeric.cuh"

namespace tp {

// A register operand: one lane's registers start at regs (+ lane * stride on the host).
template <class T> struct RegOperand {
  const T* regs;
  template <class Lanes> TP_HD RegOperand on(const Lanes& g, int stride, int lane) const {
    return {g.regs(regs, stride, lane)};
  }
  TP_HD T operator[](long long i) const { return regs[i]; }
};
template <class T> struct ScalarOperand {
  T value;
  template <class Lanes> TP_HD ScalarOperand on(const Lanes&, int, int) const { return *this; }
  TP_HD T operator[](long long) const { return value; }
};

namespace map_op {

struct Zero {};  // no operand: the output dtype's +0
struct Copy {    // fill: the scalar operand into every register
  template <class T> static TP_HD T apply(T x) { return x; }
};
struct Cast {};  // one rounding to the output dtype
struct Sqrt {
  template <class T> static TP_HD T apply(T x) { return sqrt(x); }
};
struct Exp {
  template <class T> static TP_HD T apply(T x) { return exp(x); }
};
struct Exp2 {
  template <class T> static TP_HD T apply(T x) { return exp2(x); }
};
struct Log2 {
  template <class T> static TP_HD T apply(T x) { return log2(x); }
};
struct Reciprocal {
  template <class T> static TP_HD T apply(T x) { return reciprocal(x); }
};
struct Silu {  // x / (1 + exp(0 - x)), evaluated in the operand dtype
  template <class T> static TP_HD T apply(T x) {
    return fdiv(x, add(cast<T>(1.0f), exp(sub(cast<T>(0.0f), x))));
  }
};
struct Add {
  template <class T> static TP_HD T apply(T a, T b) { return add(a, b); }
};
struct Sub {
  template <class T> static TP_HD T apply(T a, T b) { return sub(a, b); }
};
struct Mul {
  template <class T> static TP_HD T apply(T a, T b) { return mul(a, b); }
};
struct Fdiv {
  template <class T> static TP_HD T apply(T a, T b) { return fdiv(a, b); }
};
struct Maximum {
  template <class T> static TP_HD T apply(T a, T b) { return max_num(a, b); }
};
struct MaximumNaN {
  template <class T> static TP_HD T apply(T a, T b) { return max_nan(a, b); }
};
struct Fma {
  template <class T> static TP_HD T apply(T a, T b, T c) { return fma(a, b, c); }
};

// Op as a function to the output dtype TD: the same-dtype maps return TD already; Zero and
// Cast need TD to know what to produce.
template <class Op, class TD> struct To {
  template <class... A> static TD TP_HD apply(A... a) { return Op::apply(a...); }
};
template <class TD> struct To<Zero, TD> {
  static TD TP_HD apply() { return cast<TD>(0.0f); }
};
template <class TD> struct To<Cast, TD> {
  template <class From> static TD TP_HD apply(From x) { return cast<TD>(x); }
};

}  // namespace map_op

// dst[f] = Op(operands[f]...) for every register slot f of one bundle.
template <class Op, int kUnroll, class TD, class... Operands>
TP_HD void map_registers(TD* dst, int slots, const Operands&... operands) {
  TP_UNROLL_BY(kUnroll)
  for (int f = 0; f < slots; ++f) dst[f] = map_op::To<Op, TD>::apply(operands[f]...);
}

// Every lane of the scope instance maps its own bundle; lanes never talk.
template <class Op, int kUnroll, class TD, class Lanes, class... Operands>
TP_HD void map_tile(const Lanes& g, TD* dst, int stride, int slots, const Operands&... operands) {
  g.each([&](int lane) {
    map_registers<Op, kUnroll>(g.regs(dst, stride, lane), slots, operands.on(g, stride, lane)...);
  });
}

}  // namespace tp
