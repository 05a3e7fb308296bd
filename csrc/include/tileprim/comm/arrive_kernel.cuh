// The kernel of a rank that takes part in a treduce without a share of the work (signals.cuh,
// arrive_and_wait): compiled beside the treduce kernel in one process, alone in a process whose
// rank's data another process reduces.
#pragma once
#include "signals.cuh"

#if TP_ON_DEVICE
extern "C" __global__ void tp_arrive(const tp::signals::PadSet pads, const tp::signals::Pad* own,
                                     const unsigned long long* abandoned, unsigned long long epoch, int self,
                                     unsigned workers, unsigned long long timeout_ns) {
  tp::signals::arrive_and_wait(pads, own, abandoned, epoch, self, workers, timeout_ns);
}
#endif
