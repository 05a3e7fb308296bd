#include "backends/nccl/nccl_communicator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>

#include "backends/cuda/driver.h"
#include "backends/nccl/nccl_library.h"

namespace tp::nccl {

namespace {

Library& usable() {
  Library& library = Library::get();
  if (!library.status().ok) throw cuda::CudaError("NCCL is unavailable: " + library.status().error);
  return library;
}

std::chrono::steady_clock::time_point deadline_after(double timeout_s) {
  const double bounded = std::min(timeout_s, 1e9);  // the communicator's timeouts are checked finite
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(bounded));
}

}  // namespace

std::string unique_id() {
  Library& nccl = usable();
  ncclUniqueId id;
  nccl.check(nccl.ncclGetUniqueId(&id), "ncclGetUniqueId");
  return std::string(id.internal, sizeof(id.internal));
}

Communicator::Communicator(const std::string& unique_id, int world_size, int rank, int device, double timeout_s)
    : world_size_(world_size), rank_(rank), device_(device) {
  Library& nccl = usable();
  if (unique_id.size() != sizeof(ncclUniqueId)) throw std::invalid_argument("unique_id: expected 128 bytes");
  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  cuda::Driver& d = cuda::Driver::get();
  cuda::DeviceScope scope;
  scope.use(device);  // NCCL binds the communicator to the current device
  ncclConfig_t config{sizeof(ncclConfig_t), 0xcafebeefu, 21400u, 0};
  const ncclResult_t started = nccl.ncclCommInitRankConfig(&comm_, world_size, id, rank, &config);
  if (!comm_) nccl.check(started, "ncclCommInitRankConfig");
  try {
    settle(started, "ncclCommInitRankConfig", deadline_after(timeout_s));
  } catch (const std::exception&) {
    abort_locked();
    throw;
  }
  d.check(d.cuStreamCreate(&receiving_, cuda::CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  for (CUevent* event : {&start_, &received_[0], &received_[1], &folded_[0], &folded_[1]})
    d.check(d.cuEventCreate(event, cuda::CU_EVENT_DISABLE_TIMING), "cuEventCreate");
}

Communicator::~Communicator() {
  cuda::Driver& d = cuda::Driver::get();
  cuda::DeviceScope scope;
  try {
    scope.use(device_);
  } catch (const std::exception&) {
    return;  // the driver is gone (process exit): nothing left to free
  }
  if (comm_) Library::get().ncclCommDestroy(comm_);  // waits for this rank's pending operations
  if (receiving_) d.cuStreamSynchronize(receiving_);
  staging_.reset();
  for (Retired& old : retired_) {
    d.cuEventSynchronize(old.done);
    old.buffer.reset();
    d.cuEventDestroy(old.done);
  }
  for (CUevent event : {start_, received_[0], received_[1], folded_[0], folded_[1]})
    if (event) d.cuEventDestroy(event);
  for (const InFlight& call : watched_) d.cuEventDestroy(call.end);
  for (CUevent event : spare_events_) d.cuEventDestroy(event);
  if (receiving_) d.cuStreamDestroy(receiving_);
}

void Communicator::abort() {
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  abort_locked();
}

bool Communicator::aborted() {
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  return comm_ == nullptr;
}

void Communicator::abort_locked() {
  if (!comm_) return;
  cuda::DeviceScope scope;
  scope.use(device_);
  Library::get().ncclCommAbort(comm_);
  comm_ = nullptr;
}

void Communicator::abandon(bool group_open, const std::exception& e) {
  if (group_open) Library::get().ncclGroupEnd();  // this thread's group closed: later NCCL calls on it are its own
  abort_locked();
  throw cuda::CudaError(std::string(e.what()) + "; this rank could not enqueue its part of the call, so its NCCL "
                        "communicator was aborted (the peers' transfers fail instead of waiting)");
}

void Communicator::watch(CUstream stream, double timeout_s) {
  cuda::Driver& d = cuda::Driver::get();
  cuda::DeviceScope scope;
  scope.use(device_);
  std::lock_guard<std::mutex> lock(watched_mutex_);
  CUevent event = nullptr;
  if (spare_events_.empty()) {
    d.check(d.cuEventCreate(&event, cuda::CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  } else {
    event = spare_events_.back();
    spare_events_.pop_back();
  }
  d.check(d.cuEventRecord(event, stream), "cuEventRecord");
  watched_.push_back({event, std::chrono::steady_clock::now(), timeout_s});
}

std::optional<std::pair<double, double>> Communicator::oldest_in_flight() {
  cuda::Driver& d = cuda::Driver::get();
  cuda::DeviceScope scope;
  scope.use(device_);
  std::lock_guard<std::mutex> lock(watched_mutex_);
  while (!watched_.empty()) {
    const InFlight call = watched_.front();
    if (d.cuEventQuery(call.end) == cuda::CUDA_ERROR_NOT_READY) {
      return std::make_pair(std::chrono::duration<double>(std::chrono::steady_clock::now() - call.since).count(),
                            call.timeout_s);
    }
    watched_.pop_front();  // done (or failed: the stream reports that itself)
    spare_events_.push_back(call.end);
  }
  return std::nullopt;
}

std::string Communicator::async_error() {
  Library& nccl = usable();
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  if (!comm_) return "";
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = nccl.ncclCommGetAsyncError(comm_, &state);
  if (r != ncclSuccess) state = r;
  if (state == ncclSuccess || state == ncclInProgress) return "";
  return nccl.ncclGetErrorString(state);
}

void Communicator::settle(ncclResult_t r, const char* what, std::chrono::steady_clock::time_point deadline) {
  Library& nccl = Library::get();
  while (r == ncclInProgress) {
    if (std::chrono::steady_clock::now() > deadline)
      throw cuda::CudaError(std::string(what) + ": NCCL did not finish within the call's timeout (a peer that "
                            "never joined its part of the call)");
    std::this_thread::yield();
    ncclResult_t state = ncclInProgress;
    const ncclResult_t asked = nccl.ncclCommGetAsyncError(comm_, &state);
    r = asked != ncclSuccess ? asked : state;
  }
  nccl.check(r, what);
}

void Communicator::send(CUdeviceptr source, size_t bytes, size_t chunk_bytes, int peer, CUstream stream,
                        double timeout_s) {
  Library& nccl = usable();
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  if (!comm_) throw cuda::CudaError("ncclSend: the NCCL communicator was aborted");
  if (chunk_bytes == 0) throw std::invalid_argument("chunk_bytes: must be positive");
  cuda::DeviceScope scope;
  scope.use(device_);
  const auto deadline = deadline_after(timeout_s);
  try {
    for (size_t offset = 0; offset < bytes; offset += chunk_bytes)
      settle(nccl.ncclSend(reinterpret_cast<const void*>(source + offset), std::min(chunk_bytes, bytes - offset),
                           ncclInt8, peer, comm_, stream),
             "ncclSend", deadline);
  } catch (const std::exception& e) {
    abandon(false, e);
  }
}

void Communicator::grow_staging(size_t bytes) {
  cuda::Driver& d = cuda::Driver::get();
  for (auto old = retired_.begin(); old != retired_.end();) {
    if (d.cuEventQuery(old->done) == cuda::CUDA_ERROR_NOT_READY) {
      ++old;
      continue;
    }
    old->buffer.reset();
    d.cuEventDestroy(old->done);
    old = retired_.erase(old);
  }
  if (staging_ && staging_->bytes() >= bytes) return;
  if (staging_) {  // the last calls' receives and folds may still use it: freed once they are done
    CUevent done = nullptr;
    d.check(d.cuEventCreate(&done, cuda::CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    retired_.push_back({std::move(staging_), done});
    for (int slot = 0; slot < 2; ++slot)
      if (folded_recorded_[slot]) d.check(d.cuStreamWaitEvent(receiving_, folded_[slot], 0), "cuStreamWaitEvent");
    d.check(d.cuEventRecord(done, receiving_), "cuEventRecord");
  }
  // Fault injection for the tests (tests/test_treduce_processes.py): an allocation that fails,
  // as on a GPU out of memory, so the path that aborts NCCL runs on purpose.
  if (const char* fault = std::getenv("TILEPRIM_INJECT_FAULT"); fault && std::strcmp(fault, "nccl_staging") == 0)
    throw cuda::CudaError("cuMemAlloc of " + std::to_string(bytes) + " bytes of staging: injected failure "
                          "(TILEPRIM_INJECT_FAULT=nccl_staging)");
  staging_ = std::make_unique<cuda::DeviceBuffer>(bytes, device_);
}

void Communicator::gather(size_t bytes, size_t chunk_bytes, const std::vector<int>& peers, CUstream stream,
                          const Fold& fold, double timeout_s) {
  Library& nccl = usable();
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  if (!comm_) throw cuda::CudaError("ncclRecv: the NCCL communicator was aborted");
  if (chunk_bytes == 0) throw std::invalid_argument("chunk_bytes: must be positive");
  cuda::Driver& d = cuda::Driver::get();
  cuda::DeviceScope scope;
  scope.use(device_);
  const size_t slot_bytes = chunk_bytes * peers.size();
  const auto deadline = deadline_after(timeout_s);
  std::exception_ptr failure;
  bool group_open = false;
  try {
    grow_staging(std::max<size_t>(2 * slot_bytes, 1));
    // Receives start once the caller's stream is here, and the last call's folds freed the slots.
    d.check(d.cuEventRecord(start_, stream), "cuEventRecord");
    d.check(d.cuStreamWaitEvent(receiving_, start_, 0), "cuStreamWaitEvent");
    for (int slot = 0; slot < 2; ++slot)
      if (folded_recorded_[slot]) d.check(d.cuStreamWaitEvent(receiving_, folded_[slot], 0), "cuStreamWaitEvent");
    std::vector<CUdeviceptr> staged(peers.size());
    for (size_t offset = 0, chunk = 0; offset < bytes; offset += chunk_bytes, ++chunk) {
      const int slot = static_cast<int>(chunk % 2);
      const size_t length = std::min(chunk_bytes, bytes - offset);
      if (chunk >= 2) d.check(d.cuStreamWaitEvent(receiving_, folded_[slot], 0), "cuStreamWaitEvent");
      for (size_t i = 0; i < peers.size(); ++i) staged[i] = staging_->pointer() + slot * slot_bytes + i * chunk_bytes;
      if (!peers.empty()) {
        nccl.check(nccl.ncclGroupStart(), "ncclGroupStart");
        group_open = true;
        for (size_t i = 0; i < peers.size(); ++i)
          nccl.check(nccl.ncclRecv(reinterpret_cast<void*>(staged[i]), length, ncclInt8, peers[i], comm_, receiving_),
                     "ncclRecv");
        group_open = false;
        settle(nccl.ncclGroupEnd(), "ncclGroupEnd", deadline);
      }
      d.check(d.cuEventRecord(received_[slot], receiving_), "cuEventRecord");
      d.check(d.cuStreamWaitEvent(stream, received_[slot], 0), "cuStreamWaitEvent");
      if (!failure) {
        try {
          fold(offset, length, staged);
        } catch (...) {
          failure = std::current_exception();
        }
      }
      d.check(d.cuEventRecord(folded_[slot], stream), "cuEventRecord");
      folded_recorded_[slot] = true;
    }
  } catch (const std::exception& e) {
    abandon(group_open, e);
  }
  if (failure) std::rethrow_exception(failure);
}

void Communicator::exchange_shards(CUdeviceptr source, CUdeviceptr out, const std::vector<size_t>& bounds,
                                   const std::vector<int>& workers, int root, size_t step_bytes, CUstream stream,
                                   const ShardFold& shard_fold, double timeout_s) {
  Library& nccl = usable();
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  if (!comm_) throw cuda::CudaError("ncclSend: the NCCL communicator was aborted");
  if (step_bytes == 0) throw std::invalid_argument("step_bytes: must be positive");
  if (bounds.size() != workers.size() + 1) throw std::invalid_argument("bounds: one more than the workers");
  cuda::Driver& d = cuda::Driver::get();
  cuda::DeviceScope scope;
  scope.use(device_);
  const auto mine = std::find(workers.begin(), workers.end(), rank_);
  const bool worker = mine != workers.end();
  const size_t me = static_cast<size_t>(mine - workers.begin());
  std::vector<int> others;  // the ranks whose slices a worker receives
  for (int r = 0; r < world_size_; ++r)
    if (r != rank_) others.push_back(r);
  size_t longest = 0;
  for (size_t k = 0; k + 1 < bounds.size(); ++k) longest = std::max(longest, bounds[k + 1] - bounds[k]);
  const size_t steps = (longest + step_bytes - 1) / step_bytes;
  // shard k's part in a step: (offset, length), length 0 once the shard is done
  auto slice = [&](size_t k, size_t step) {
    const size_t begin = std::min(bounds[k] + step * step_bytes, bounds[k + 1]);
    return std::make_pair(begin, std::min(begin + step_bytes, bounds[k + 1]) - begin);
  };
  const bool folds = worker && slice(me, 0).second > 0;  // a worker with an empty shard only sends
  const auto deadline = deadline_after(timeout_s);
  std::exception_ptr failure;
  bool group_open = false;
  try {
    CUdeviceptr staged = 0, result = 0;
    if (folds) {
      grow_staging((others.size() + 1) * step_bytes);
      staged = staging_->pointer();
      result = staged + others.size() * step_bytes;
      for (int slot = 0; slot < 2; ++slot)  // the last call's use of the staging is over
        if (folded_recorded_[slot]) d.check(d.cuStreamWaitEvent(stream, folded_[slot], 0), "cuStreamWaitEvent");
    }
    std::vector<CUdeviceptr> copies(static_cast<size_t>(world_size_));
    for (size_t step = 0; step <= steps; ++step) {
      nccl.check(nccl.ncclGroupStart(), "ncclGroupStart");
      group_open = true;
      for (size_t k = 0; step < steps && k < workers.size(); ++k) {
        const auto [offset, length] = slice(k, step);
        if (workers[k] != rank_ && length)
          nccl.check(nccl.ncclSend(reinterpret_cast<const void*>(source + offset), length, ncclInt8, workers[k], comm_,
                                   stream),
                     "ncclSend");
      }
      const size_t receiving = folds && step < steps ? slice(me, step).second : 0;
      for (size_t i = 0; receiving && i < others.size(); ++i)
        nccl.check(nccl.ncclRecv(reinterpret_cast<void*>(staged + i * step_bytes), receiving, ncclInt8, others[i],
                                 comm_, stream),
                   "ncclRecv");
      if (folds && step > 0 && slice(me, step - 1).second)
        nccl.check(nccl.ncclSend(reinterpret_cast<const void*>(result), slice(me, step - 1).second, ncclInt8, root,
                                 comm_, stream),
                   "ncclSend");
      for (size_t k = 0; rank_ == root && step > 0 && k < workers.size(); ++k) {
        const auto [offset, length] = slice(k, step - 1);
        if (length)
          nccl.check(nccl.ncclRecv(reinterpret_cast<void*>(out + offset), length, ncclInt8, workers[k], comm_, stream),
                     "ncclRecv");
      }
      group_open = false;
      settle(nccl.ncclGroupEnd(), "ncclGroupEnd", deadline);
      if (!receiving) continue;
      const size_t offset = slice(me, step).first;
      for (size_t i = 0; i < others.size(); ++i) copies[static_cast<size_t>(others[i])] = staged + i * step_bytes;
      copies[static_cast<size_t>(rank_)] = source + offset;
      if (!failure) {
        try {
          shard_fold(offset, receiving, copies, result);
        } catch (...) {
          failure = std::current_exception();
        }
      }
      if (failure)  // the root gets all-ones bytes (NaN, or -1) for this shard, not stale staging
        d.check(d.cuMemsetD8Async(result, 0xFF, receiving, stream), "cuMemsetD8Async");
    }
    if (folds) {
      d.check(d.cuEventRecord(folded_[0], stream), "cuEventRecord");
      folded_recorded_[0] = true;
    }
  } catch (const std::exception& e) {
    abandon(group_open, e);
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace tp::nccl
