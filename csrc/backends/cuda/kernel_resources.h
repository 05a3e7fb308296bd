// What a compiled kernel takes of a streaming multiprocessor, known without a GPU: the registers
// per thread and the stack frame ptxas gave its function (read from the CUBIN NVRTC built), and
// how many of its blocks one SM of the architecture then holds at once (CUDA's occupancy rules).
// tp.lower shows them: a kernel whose registers halve the blocks per SM can be slower for all its
// fewer instructions.
#pragma once
#include <string>

namespace tp::cuda {

// From the CUBIN's ELF: the EIATTR_REGCOUNT and EIATTR_FRAME_SIZE entries of .nv.info for the
// function's symbol, EIATTR_NUM_BARRIERS of .nv.info.<function>, and the size of its .nv.shared
// section. -1 where unknown: a PTX image, no
// such function, or bytes this reader does not understand (every offset and size is checked
// against the image; nothing is trusted).
struct FunctionResources {
  int registers = -1;            // per thread
  long long frame_bytes = -1;    // per thread, in local memory: spilled registers and local arrays
  long long static_shared = -1;  // per block, declared in the source (beside the launch's dynamic)
  int barriers = -1;             // named barriers per block: the highest id used + 1, all 16 where an id is a register
};
FunctionResources function_resources(const std::string& cubin, const std::string& function);

// The blocks of `block_threads` threads, each thread holding `registers` and each block
// `shared_bytes` of shared memory and `barriers` named barriers, that one SM of `arch` runs side by
// side, and the limit that binds: in words with its figures ("registers: 128 per thread allow 2
// blocks of 8 warps").
struct Residency {
  int blocks = 0;
  int warps = 0;      // blocks x warps per block
  int max_warps = 0;  // the SM's
  std::string limit;
};
Residency residency(const std::string& arch, int block_threads, int registers, long long shared_bytes, int barriers);

}  // namespace tp::cuda
