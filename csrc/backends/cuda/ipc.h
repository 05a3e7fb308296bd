// CUDA IPC between the processes of one host: a process exports the allocation a device
// pointer lies in (a 64-byte handle and the pointer's offset in it), another maps it into its
// own address space. treduce across processes maps every rank's source and every rank's signal
// pad (with its chain memory after it) this way; a rank that runs no kernel of its own says
// "ready" and waits for "done" on those pads with arrive().
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tp::cuda {

// (handle bytes, offset of `pointer` from its allocation's base).
std::pair<std::string, std::uint64_t> ipc_export(std::uint64_t pointer, int device);
// The base of another process's allocation, mapped on `device` (peer access enabled on demand).
std::uint64_t ipc_open(const std::string& handle, int device);
void ipc_close(std::uint64_t base, int device);

// On `stream` of `device`: publish rank `self` ready at `epoch` in the pad of every worker in the
// `workers` bit mask (`pads`: every rank's), then hold the stream until every worker says it is
// done with this epoch in pads[self], or this rank's host abandons the call (raises the flag in
// mapped host memory at `abandoned` to `epoch`). The wait is a kernel, so it ends with a trap
// after `timeout` seconds should nothing end it.
void arrive(const std::vector<std::uint64_t>& pads, std::uintptr_t abandoned, unsigned long long epoch, int self,
            unsigned workers, double timeout, int device, std::uintptr_t stream);

// A failed call's way out, so that no GPU waits for it: raises `rank`'s ready (or done) flag on
// the pad to `epoch` from a stream of this process's own, which nothing else holds up.
void raise_flag(std::uint64_t pad, unsigned long long epoch, int rank, bool done, int device);
// The same for a chain: every ready and consumed flag of the chain memory after `pad` raised past
// every step of call `epoch`, so that no neighbour's kernel waits on them.
void raise_chain_flags(std::uint64_t pad, unsigned long long epoch, int device);

}  // namespace tp::cuda
