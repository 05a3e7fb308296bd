// Signals between GPUs, in device memory every rank reaches (peer access, or CUDA IPC between
// processes): a rank publishes an epoch into a flag with a system-scope release; another
// observes it with acquire loads. So GPUs order their work on each other's data without the
// host: "source ready" (a rank's stream reached the call, its data is complete) and "done"
// (a worker finished with everyone's data; its results are visible). Epochs only grow: the
// host numbers every call, so a pad is never reset. A flag only ever rises (an atomic max): a
// host that gives up on a call may raise a flag while an earlier call's kernel still runs, and
// that kernel's later publish must not lower it.
//
// Every rank owns a pad and a kernel only ever polls its own (local reads): ranks publish
// "ready" into each worker's pad, workers publish "done" into every rank's pad. (In one process
// every rank shares one pad; across processes the root is the only worker.) A rank's host can
// end its kernels' waits: it raises its `abandoned` word (pinned host memory its GPU polls, so
// no driver call is needed, which another thread's synchronous copy could hold up) to the last
// call it gave up on; its kernels then touch no other rank's memory for that call.
#pragma once
#include "../config.cuh"

namespace tp {
namespace signals {

struct Pad {
  unsigned long long ready[kMaxGroupSize];  // the last epoch at which rank r reached the call
  unsigned long long done[kMaxGroupSize];   // the last epoch at which worker w finished its share
};

// Every rank's pad as one kernel parameter (in one process, every entry is the one pad).
struct PadSet {
  Pad* pad[kMaxGroupSize];
};

// A wait's limit as the kernels take it (seconds from the host; far beyond any run: ~31 years).
inline unsigned long long timeout_ns(double seconds) {
  return static_cast<unsigned long long>((seconds < 1e9 ? seconds : 1e9) * 1e9);
}

#if TP_ON_DEVICE
__device__ __forceinline__ void raise_to(unsigned long long* flag, unsigned long long epoch) {
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

// Waits until `flag` (in this rank's pad) reaches `epoch`: true; false once this rank's host
// abandoned the call (`abandoned`, in host memory, null where nobody abandons). That is a bus
// read, and every CTA waits: it is looked at every kLookNs only, so a wait of microseconds (a
// call that goes well) makes none. A wait longer than `timeout_ns` is a rank that never reached
// the call and a host that could not tell: the kernel traps (its stream reports an error)
// rather than hang.
__device__ __forceinline__ bool await(const unsigned long long* flag, unsigned long long epoch,
                                      const unsigned long long* abandoned, unsigned long long timeout_ns) {
  constexpr unsigned long long kLookNs = 100000;
  const unsigned long long start = now_ns();
  unsigned long long looked = start;
  while (observe(flag) < epoch) {
    const unsigned long long now = now_ns();
    if (abandoned && now - looked > kLookNs) {
      if (observe(abandoned) >= epoch) return false;
      looked = now;
    }
    if (now - start > timeout_ns) __trap();
    __nanosleep(64);
  }
  return true;
}

// A rank that runs no share of the work: it is ready now (in every worker's pad), and its stream
// goes on once every worker is done with its data (as its own pad says).
__device__ __forceinline__ void arrive_and_wait(const PadSet& pads, const Pad* own, const unsigned long long* abandoned,
                                                unsigned long long epoch, int self, unsigned workers,
                                                unsigned long long timeout_ns) {
  __threadfence_system();  // everything this rank's stream wrote before is visible first
  for (int w = 0; w < kMaxGroupSize; ++w) {
    if (workers >> w & 1u) raise_to(&pads.pad[w]->ready[self], epoch);
  }
  for (int w = 0; w < kMaxGroupSize; ++w) {
    if ((workers >> w & 1u) && !await(&own->done[w], epoch, abandoned, timeout_ns)) return;
  }
}
#endif

}  // namespace signals
}  // namespace tp
