// elementwise -> reg: every thread applies the op to each register of its bundle (the
// slots its layout gives it). Operands are register arrays or scalars broadcast to all.
#pragma once
#include "../numeric.cuh"

namespace tp {

template <class T> struct RegOperand {
  const T* regs;
  TP_HD T operator[](long long i) const { return regs[i]; }
};
template <class T> struct ScalarOperand {
  T value;
  TP_HD T operator[](long long) const { return value; }
};

namespace map_op {

struct Zero {
  template <class T> static TP_HD T apply_as() { return cast<T>(0.0f); }
};
struct Copy {  // fill: the scalar operand into every register
  template <class T> static TP_HD T apply(T x) { return x; }
};
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
template <class To> struct Cast {
  template <class From> static TP_HD To apply(From x) { return cast<To>(x); }
};

}  // namespace map_op

// dst[f] = Op(operands[f]...) for every register slot f of the bundle.
template <class Op, int kUnroll, class TD, class... Operands>
TP_HD void map_registers(TD* dst, int slots, const Operands&... operands) {
  TP_UNROLL_BY(kUnroll)
  for (int f = 0; f < slots; ++f) dst[f] = Op::apply(operands[f]...);
}

template <int kUnroll, class TD>
TP_HD void zero_registers(TD* dst, int slots) {
  TP_UNROLL_BY(kUnroll)
  for (int f = 0; f < slots; ++f) dst[f] = map_op::Zero::apply_as<TD>();
}

}  // namespace tp
