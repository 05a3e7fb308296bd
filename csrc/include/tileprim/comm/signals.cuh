// Signals between GPUs, in device memory every rank reaches (peer access, or CUDA IPC between
// processes): a rank publishes an epoch into a flag with a system-scope release store; another
// observes it with acquire loads. So GPUs order their work on each other's data without the
// host: "source ready" (a rank's stream reached the call, its data is complete) and "done"
// (a worker finished with everyone's data; its results are visible). Epochs only grow: the
// host numbers every call, so a pad is never reset. A flag only ever rises (an atomic max): a
// host that gives up on a call may write its epoch into `done` while an earlier call's kernel
// still runs, and that kernel's later publish must not lower it.
#pragma once
#include "../config.cuh"

namespace tp {
namespace signals {

struct Pad {
  unsigned long long ready[kMaxGroupSize];  // the last epoch at which rank r reached the call
  unsigned long long done[kMaxGroupSize];   // the last epoch at which worker w finished its share
};

#if TP_ON_DEVICE
// A wait longer than this is a rank that died or never called: the kernel traps, the stream
// reports an error, instead of a hang.
constexpr unsigned long long kTimeoutNs = 60ull * 1000 * 1000 * 1000;

__device__ __forceinline__ void publish(unsigned long long* flag, unsigned long long epoch) {
  __threadfence_system();  // everything this thread saw or wrote before is visible first
  asm volatile("red.release.sys.global.max.u64 [%0], %1;" ::"l"(flag), "l"(epoch) : "memory");
}

__device__ __forceinline__ unsigned long long observe(const unsigned long long* flag) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(flag) : "memory");
  return v;
}

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void await(const unsigned long long* flag, unsigned long long epoch) {
  const unsigned long long start = now_ns();
  while (observe(flag) < epoch) {
    if (now_ns() - start > kTimeoutNs) __trap();
    __nanosleep(64);
  }
}

// A rank that runs no share of the work: it is ready now, and its stream goes on once every
// worker is done with its data.
__device__ __forceinline__ void arrive_and_wait(Pad* pad, unsigned long long epoch, int self, unsigned workers) {
  publish(&pad->ready[self], epoch);
  for (int w = 0; w < kMaxGroupSize; ++w) {
    if (workers >> w & 1u) await(&pad->done[w], epoch);
  }
}
#endif

}  // namespace signals
}  // namespace tp
