#include "backends/nccl/nccl_communicator.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>

#include "backends/cuda/driver.h"
#include "backends/nccl/nccl_library.h"

namespace tp::nccl {

namespace {

// Nonblocking (blocking = 0): every NCCL call returns at once and is polled against its call's
// deadline, so no rank waits past its timeout on a peer that never joined.
ncclConfig_t nonblocking_config() {
  return ncclConfig_t{sizeof(ncclConfig_t), 0xcafebeefu, 21800u, 0, TP_NCCL_UNDEFINED,
                      TP_NCCL_UNDEFINED,    TP_NCCL_UNDEFINED, nullptr, 0};
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::string unique_id() {
  Library& nccl = Library::usable();
  ncclUniqueId id;
  nccl.check(nccl.ncclGetUniqueId(&id), "ncclGetUniqueId");
  return std::string(id.internal, sizeof(id.internal));
}

std::chrono::steady_clock::time_point Communicator::deadline_after(double timeout_s) {
  const double bounded = std::min(timeout_s, 1e9);  // the communicator's timeouts are checked finite
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(bounded));
}

Communicator::Communicator(const std::string& unique_id, int world_size, int rank, int device, double timeout_s)
    : world_size_(world_size), rank_(rank), device_(device) {
  Library& nccl = Library::usable();
  if (unique_id.size() != sizeof(ncclUniqueId)) throw std::invalid_argument("unique_id: expected 128 bytes");
  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  cuda::Driver& d = cuda::Driver::get();
  cuda::DeviceScope scope;
  scope.use(device);  // NCCL binds the communicator to the current device
  d.check(d.cuStreamCreate(&receiving_, cuda::CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  for (CUevent* event : {&start_, &received_[0], &received_[1], &folded_[0], &folded_[1]})
    d.check(d.cuEventCreate(event, cuda::CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  const auto deadline = deadline_after(timeout_s);
  ncclConfig_t config = nonblocking_config();
  const ncclResult_t started = nccl.ncclCommInitRankConfig(&comm_, world_size, id, rank, &config);
  if (!comm_) nccl.check(started, "ncclCommInitRankConfig");
  try {
    settle(comm_, started, "ncclCommInitRankConfig", deadline);
    if (world_size > 1) connect_every_pair(deadline);
  } catch (const std::exception&) {
    abort_locked();
    free_device_objects();
    throw;
  }
}

// One NCCL group of a byte from and to every other rank: NCCL connects a pair's every channel at
// its first send and receive, whatever their size, so this connects them all within the timeout.
// (A blocking communicator split off this one to carry the transfers was tried, sessions before
// 19: NCCL 2.28 refused it -- "Blocking and nonblocking communicators are not allowed in the same
// group" -- and every call failed.)
void Communicator::connect_every_pair(std::chrono::steady_clock::time_point deadline) {
  Library& nccl = Library::get();
  cuda::Driver& d = cuda::Driver::get();
  const size_t n = static_cast<size_t>(world_size_);
  grow_staging(2 * n);  // freed after NCCL is done with it, even on failure
  const CUdeviceptr bytes = staging_->pointer();
  d.check(d.cuMemsetD8Async(bytes, 1, n, receiving_), "cuMemsetD8Async");
  nccl.check(nccl.ncclGroupStart(), "ncclGroupStart");
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_) continue;
    nccl.check(nccl.ncclSend(reinterpret_cast<const void*>(bytes + r), 1, ncclInt8, r, comm_, receiving_), "ncclSend");
    nccl.check(nccl.ncclRecv(reinterpret_cast<void*>(bytes + n + r), 1, ncclInt8, r, comm_, receiving_), "ncclRecv");
  }
  settle(comm_, nccl.ncclGroupEnd(), "ncclGroupEnd (connecting every pair of ranks)", deadline);
  for (;;) {  // the bytes arrived (every peer did the same), or the deadline passed
    const cuda::CUresult state = d.cuStreamQuery(receiving_);
    if (state != cuda::CUDA_ERROR_NOT_READY) {
      d.check(state, "cuStreamQuery");
      return;
    }
    if (std::chrono::steady_clock::now() > deadline)
      throw cuda::CudaError("connecting every pair of ranks: NCCL did not finish within the call's timeout (a peer "
                            "that never joined)");
    std::this_thread::yield();
  }
}

Communicator::~Communicator() {
  cuda::DeviceScope scope;
  try {
    scope.use(device_);
  } catch (const std::exception&) {
    return;  // the driver is gone (process exit): nothing left to free
  }
  // each waits for this rank's pending operations on it
  if (comm_) Library::get().ncclCommDestroy(comm_);
  free_device_objects();
}

void Communicator::free_device_objects() {
  cuda::Driver& d = cuda::Driver::get();
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
  Library& nccl = Library::usable();
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  if (!comm_) return "";
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = nccl.ncclCommGetAsyncError(comm_, &state);
  if (r != ncclSuccess) state = r;
  return state != ncclSuccess && state != ncclInProgress ? nccl.ncclGetErrorString(state) : "";
}

std::map<std::string, double> Communicator::timings() {
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  std::map<std::string, double> out = timings_;
  timings_.clear();
  return out;
}

void Communicator::settle(ncclComm_t comm, ncclResult_t r, const char* what,
                          std::chrono::steady_clock::time_point deadline) {
  Library& nccl = Library::get();
  while (r == ncclInProgress) {
    if (std::chrono::steady_clock::now() > deadline)
      throw cuda::CudaError(std::string(what) + ": NCCL did not finish within the call's timeout (a peer that "
                            "never joined its part of the call)");
    std::this_thread::yield();
    ncclResult_t state = ncclInProgress;
    const ncclResult_t asked = nccl.ncclCommGetAsyncError(comm, &state);
    r = asked != ncclSuccess ? asked : state;
  }
  nccl.check(r, what);
}

void Communicator::group(const std::function<void()>& ops, std::chrono::steady_clock::time_point deadline) {
  Library& nccl = Library::get();
  const auto start = std::chrono::steady_clock::now();
  nccl.check(nccl.ncclGroupStart(), "ncclGroupStart");
  try {
    ops();
  } catch (...) {
    nccl.ncclGroupEnd();  // this thread's group closed: later NCCL calls on it are its own
    throw;
  }
  settle(comm_, nccl.ncclGroupEnd(), "ncclGroupEnd", deadline);
  timings_["enqueue"] += seconds_since(start);
  timings_["groups"] += 1;
}

void Communicator::fold(const std::function<void()>& f, std::exception_ptr& failure) {
  if (failure) return;
  const auto start = std::chrono::steady_clock::now();
  try {
    f();
  } catch (...) {
    failure = std::current_exception();
  }
  timings_["fold"] += seconds_since(start);
  timings_["folds"] += 1;
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

}  // namespace tp::nccl
