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

// Each map names itself for the code generator (kCudaName).
namespace map_op {

struct Zero {
  template <class T> static TP_HD T apply_as() { return cast<T>(0.0f); }
};
struct Copy {  // fill: the scalar operand into every register
  static constexpr const char* kCudaName = "tp::map_op::Copy";
  template <class T> static TP_HD T apply(T x) { return x; }
};
struct Sqrt {
  static constexpr const char* kCudaName = "tp::map_op::Sqrt";
  template <class T> static TP_HD T apply(T x) { return sqrt(x); }
};
struct Exp {
  static constexpr const char* kCudaName = "tp::map_op::Exp";
  template <class T> static TP_HD T apply(T x) { return exp(x); }
};
struct Exp2 {
  static constexpr const char* kCudaName = "tp::map_op::Exp2";
  template <class T> static TP_HD T apply(T x) { return exp2(x); }
};
struct Log2 {
  static constexpr const char* kCudaName = "tp::map_op::Log2";
  template <class T> static TP_HD T apply(T x) { return log2(x); }
};
struct Reciprocal {
  static constexpr const char* kCudaName = "tp::map_op::Reciprocal";
  template <class T> static TP_HD T apply(T x) { return reciprocal(x); }
};
struct Silu {  // x / (1 + exp(0 - x)), evaluated in the operand dtype
  static constexpr const char* kCudaName = "tp::map_op::Silu";
  template <class T> static TP_HD T apply(T x) {
    return fdiv(x, add(cast<T>(1.0f), exp(sub(cast<T>(0.0f), x))));
  }
};
struct Add {
  static constexpr const char* kCudaName = "tp::map_op::Add";
  template <class T> static TP_HD T apply(T a, T b) { return add(a, b); }
};
struct Sub {
  static constexpr const char* kCudaName = "tp::map_op::Sub";
  template <class T> static TP_HD T apply(T a, T b) { return sub(a, b); }
};
struct Mul {
  static constexpr const char* kCudaName = "tp::map_op::Mul";
  template <class T> static TP_HD T apply(T a, T b) { return mul(a, b); }
};
struct Fdiv {
  static constexpr const char* kCudaName = "tp::map_op::Fdiv";
  template <class T> static TP_HD T apply(T a, T b) { return fdiv(a, b); }
};
struct Maximum {
  static constexpr const char* kCudaName = "tp::map_op::Maximum";
  template <class T> static TP_HD T apply(T a, T b) { return max_num(a, b); }
};
struct MaximumNaN {
  static constexpr const char* kCudaName = "tp::map_op::MaximumNaN";
  template <class T> static TP_HD T apply(T a, T b) { return max_nan(a, b); }
};
struct Fma {
  static constexpr const char* kCudaName = "tp::map_op::Fma";
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
