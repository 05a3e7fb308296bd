// One rank's NCCL communicator, and the two halves of treduce's NCCL transport on it: a rank
// sends its packed source to the root chunk by chunk; the root receives every other rank's
// chunk into ping/pong staging buffers on its own stream while the caller's stream folds the
// previous chunk (the fold is the caller's: tileprim's one-process treduce over the staged
// chunks, so the order and the bits are the one-process ones).
#pragma once
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
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
  // Collective: every rank of the job calls it with the same id.
  Communicator(const std::string& unique_id, int world_size, int rank, int device);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Sends bytes [0, bytes) of `source` to `peer` as chunks of `chunk_bytes`, on `stream`
  // (the source may be reused in that stream's order).
  void send(CUdeviceptr source, size_t bytes, size_t chunk_bytes, int peer, CUstream stream);

  // fold(offset, length, staged): on `stream`, reduce bytes [offset, offset + length) given
  // each peer's copy of them at staged[i] (peers' order). Called once per chunk, in order.
  using Fold = std::function<void(size_t offset, size_t length, const std::vector<CUdeviceptr>& staged)>;
  // Receives bytes [0, bytes) from every peer, chunk by chunk, folding each as it lands; the
  // caller's stream holds the last fold. If a fold throws, the rest is still received (the
  // peers' sends must be matched) and the first error rethrown.
  void gather(size_t bytes, size_t chunk_bytes, const std::vector<int>& peers, CUstream stream, const Fold& fold);

  // Ends the communicator now, pending operations included (a peer failed). Another thread may
  // call it (a watchdog): it waits until no send or gather is being enqueued.
  void abort();

  // For a watchdog on another thread. watch(): the work just enqueued on `stream` is a call in
  // flight, given `timeout_s` to finish (an event marks its end). oldest_in_flight(): the oldest
  // call still in flight's (seconds since it was watched, its timeout), or none. async_error():
  // NCCL's asynchronous error ("" when none).
  void watch(CUstream stream, double timeout_s);
  std::optional<std::pair<double, double>> oldest_in_flight();
  std::string async_error();

 private:
  void grow_staging(size_t bytes);

  std::mutex enqueue_;  // held while NCCL operations are enqueued, and by abort()
  std::mutex watched_mutex_;
  struct InFlight {
    CUevent end;
    std::chrono::steady_clock::time_point since;
    double timeout_s;
  };
  std::deque<InFlight> watched_;  // oldest first
  std::vector<CUevent> spare_events_;

  ncclComm_t comm_ = nullptr;
  int device_;
  CUstream receiving_ = nullptr;  // the root's receives
  CUevent start_ = nullptr;       // the caller's stream reached the call
  CUevent received_[2] = {};      // a staging slot is full
  CUevent folded_[2] = {};        // a staging slot is free again
  bool folded_recorded_[2] = {false, false};
  std::unique_ptr<cuda::DeviceBuffer> staging_;
};

}  // namespace tp::nccl
