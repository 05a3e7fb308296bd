// tileprim device headers: compile under NVRTC (the GPU kernels) and under the host
// C++ compiler (the CPU backend), so every algorithm is written once.
// No host standard headers here: NVRTC has none.
#pragma once

#if defined(__CUDACC__)
#define TP_HD __host__ __device__ __forceinline__
#define TP_HD_OUT_OF_LINE __host__ __device__ __noinline__  // a rare path kept apart on the GPU
#define TP_ON_DEVICE 1
#else
#define TP_HD inline
#define TP_HD_OUT_OF_LINE inline
#define TP_ON_DEVICE 0
#endif

// Loops over register slots are unrolled in generated kernels so the arrays stay in
// registers; loops over memory keep their trip count. TP_UNROLL_BY takes a constant
// expression (a template parameter); the host compiler ignores both.
#if defined(__CUDACC__)
#define TP_PRAGMA(x) _Pragma(#x)
#define TP_UNROLL TP_PRAGMA(unroll)
#define TP_UNROLL_BY(n) TP_PRAGMA(unroll(n))
#else
#define TP_UNROLL
#define TP_UNROLL_BY(n)
#endif

namespace tp {

// Largest rank of a tile and largest number of iters in one layout that the device
// descriptors hold; the host checks both before it plans anything.
constexpr int kMaxRank = 8;
constexpr int kMaxIters = 16;
// Ranks one collective takes (the signal pads and kernel parameters are sized for them).
constexpr int kMaxGroupSize = 16;

// Unroll factors for loops over a tile: registers need every index known at compile time.
constexpr int kUnrollRegisters = 1 << 16;
constexpr int kUnrollMemory = 1;

// How far a fold unrolls its walk over one source: `unroll` (the view's), unless the source
// is read from memory as it is folded and names its own step (Src::kFoldUnroll elements),
// so that a row of thousands of elements is not unrolled whole into the kernel.
template <class Src>
constexpr auto fold_unroll(int, int) -> decltype(Src::kFoldUnroll + 0) {
  return Src::kFoldUnroll;
}
template <class Src>
constexpr int fold_unroll(int unroll, long) {
  return unroll;
}

}  // namespace tp
