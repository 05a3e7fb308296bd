// One rank's NCCL communicator, and treduce's NCCL transport on it. root_pull: a rank sends its
// packed source to the root chunk by chunk; the root receives every other rank's chunk into
// ping/pong staging buffers on its own stream while the caller's stream folds the previous
// chunk. scatter_gather: every rank sends each worker its slice of that worker's shard, the
// worker folds it and sends the result to the root. chain: the partial travels rank to rank
// in the fold order, chunk by chunk. The folds are the caller's (tileprim's one-process treduce
// over the staged chunks), so the order and the bits are the one-process ones.
//
// No NCCL call waits on a peer past its call's timeout. Setting up is collective and may wait:
// the communicator is made nonblocking (its calls settle in the background, polled against a
// deadline), and every pair of ranks is connected once then; it carries the transfers too.
#pragma once
#include <chrono>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/device_memory.h"
#include "backends/nccl/nccl_api.h"

namespace tp::nccl {

using cuda::CUdeviceptr;
using cuda::CUevent;
using cuda::CUstream;

// 128 bytes that every rank passes to Communicator (made by one rank, shared by the bootstrap).
std::string unique_id();

class Communicator {
 public:
  // Collective: every rank of the job calls it with the same id, within `timeout_s`.
  Communicator(const std::string& unique_id, int world_size, int rank, int device, double timeout_s);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Sends bytes [0, bytes) of `source` to `peer` as chunks of `chunk_bytes`, on `stream`
  // (the source may be reused in that stream's order).
  void send(CUdeviceptr source, size_t bytes, size_t chunk_bytes, int peer, CUstream stream, double timeout_s);

  // fold(offset, length, staged): on `stream`, reduce bytes [offset, offset + length) given
  // each peer's copy of them at staged[i] (peers' order). Called once per chunk, in order.
  using Fold = std::function<void(size_t offset, size_t length, const std::vector<CUdeviceptr>& staged)>;
  // Receives bytes [0, bytes) from every peer, chunk by chunk, folding each as it lands; the
  // caller's stream holds the last fold. If a fold throws, the rest is still received (the
  // peers' sends must be matched) and the first error rethrown.
  void gather(size_t bytes, size_t chunk_bytes, const std::vector<int>& peers, CUstream stream, const Fold& fold,
              double timeout_s);

  // scatter_gather's exchange; every rank calls it with the same bounds, workers, root and step.
  // Shard k, bytes [bounds[k], bounds[k + 1]), is rank workers[k]'s to fold, `step_bytes` of it
  // a step. One NCCL group a step carries every rank's slices of the others' shards (read from
  // `source`) and each worker's result of the step before (to the root, which receives it into
  // `out`): the two phases overlap, and each group's sends and receives progress together, so
  // no rank waits on another's next step. Between groups a worker folds what it received, on
  // `stream`: shard_fold(offset, length, copies, result), copies[r] is rank r's copy of bytes
  // [offset, offset + length) (its own read in place). If a fold throws, the remaining steps are
  // still exchanged (the peers' operations must be matched), the root getting all-ones bytes for
  // the rest of that shard (NaN, or -1), and the first error rethrown.
  using ShardFold = std::function<void(size_t offset, size_t length, const std::vector<CUdeviceptr>& copies,
                                       CUdeviceptr result)>;
  void exchange_shards(CUdeviceptr source, CUdeviceptr out, const std::vector<size_t>& bounds,
                       const std::vector<int>& workers, int root, size_t step_bytes, CUstream stream,
                       const ShardFold& shard_fold, double timeout_s);

  // The chain's exchange; every rank calls it with the same order (order[0] the root), bytes
  // and chunk. Chunk c leaves the root (its packed `source`) in NCCL group c and reaches position
  // p in group c + p - 1, which folds its own chunk into it, link_fold(offset, length, partial,
  // result) on `stream`, and sends the result on in group c + p; the last position's result
  // reaches the root's `out` in group c + N - 1. Every rank's groups thus meet its neighbours'
  // with no rank's stream waiting on a later group of another. If a fold throws, the rest is
  // still exchanged, all-ones bytes (NaN, or -1) sent on for the rest, and the first error
  // rethrown.
  using LinkFold = std::function<void(size_t offset, size_t length, CUdeviceptr partial, CUdeviceptr result)>;
  void chain(CUdeviceptr source, CUdeviceptr out, size_t bytes, size_t chunk_bytes, const std::vector<int>& order,
             CUstream stream, const LinkFold& link_fold, double timeout_s);

  // Ends the communicator now, pending operations included (a peer failed). Another thread may
  // call it (a watchdog): it waits until no transfer is being enqueued. A transfer that fails
  // before it has enqueued all its operations (no memory for the staging, an NCCL error) aborts
  // too, so the peers' matching operations fail instead of waiting: aborted().
  void abort();
  bool aborted();

  // For a watchdog on another thread. watch(): the work just enqueued on `stream` is a call in
  // flight, given `timeout_s` to finish (an event marks its end). oldest_in_flight(): the oldest
  // call still in flight's (seconds since it was watched, its timeout), or none. async_error():
  // NCCL's asynchronous error ("" when none).
  void watch(CUstream stream, double timeout_s);
  std::optional<std::pair<double, double>> oldest_in_flight();
  std::string async_error();

  // Where this rank's host time went since the last ask (then reset): seconds per phase of the
  // transfers ("enqueue": NCCL calls and their settling, "fold": the caller's folds, "staging":
  // events and buffers), their counts ("groups", "folds", "calls").
  std::map<std::string, double> timings();

 private:
  // The staging, at least `bytes`; an outgrown buffer is freed once the work that used it is
  // done, with no host wait (the watchdog must be able to abort while a peer never finishes).
  void grow_staging(size_t bytes);
  // r of an NCCL call on `comm`, once NCCL has finished in the background what the call began
  // (polled until `deadline`, past which it throws); throws CudaError naming `what` on an error.
  void settle(ncclComm_t comm, ncclResult_t r, const char* what, std::chrono::steady_clock::time_point deadline);
  // One NCCL group of the transfers, timed: ops() enqueues its sends and receives.
  void group(const std::function<void()>& ops, std::chrono::steady_clock::time_point deadline);
  // A fold of the caller's, timed; its error kept in `failure` (the first one) rather than thrown.
  void fold(const std::function<void()>& f, std::exception_ptr& failure);
  // Setting up: every pair of ranks connected within the timeout (see the .cc).
  void connect_every_pair(std::chrono::steady_clock::time_point deadline);
  void abort_locked();
  void free_device_objects();  // the streams, events and buffers (NCCL done with them)
  [[noreturn]] void abandon(bool group_open, const std::exception& e);
  static std::chrono::steady_clock::time_point deadline_after(double timeout_s);

  std::mutex enqueue_mutex_;  // held while NCCL operations are enqueued, and by abort()
  std::mutex watched_mutex_;
  struct InFlight {
    CUevent end;
    std::chrono::steady_clock::time_point since;
    double timeout_s;
  };
  std::deque<InFlight> watched_;  // oldest first
  std::vector<CUevent> spare_events_;

  ncclComm_t comm_ = nullptr;  // nonblocking: made, connected and carrying the transfers within each timeout
  int world_size_, rank_, device_;
  CUstream receiving_ = nullptr;  // the root's receives
  CUevent start_ = nullptr;       // the caller's stream reached the call
  CUevent received_[2] = {};      // a staging slot is full
  CUevent folded_[2] = {};        // a staging slot is free again (exchange_shards, chain: folded_[0], all of it)
  bool folded_recorded_[2] = {false, false};
  std::unique_ptr<cuda::DeviceBuffer> staging_;
  struct Retired {
    std::unique_ptr<cuda::DeviceBuffer> buffer;
    CUevent done;
  };
  std::vector<Retired> retired_;
  std::map<std::string, double> timings_;
};

}  // namespace tp::nccl
