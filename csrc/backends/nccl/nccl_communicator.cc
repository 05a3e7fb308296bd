#include "backends/nccl/nccl_communicator.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <stdexcept>

#include "backends/cuda/driver.h"
#include "backends/nccl/nccl_library.h"

namespace tp::nccl {

namespace {

Library& usable() {
  Library& library = Library::get();
  if (!library.status().ok) throw cuda::CudaError("NCCL is unavailable: " + library.status().error);
  return library;
}

}  // namespace

std::string unique_id() {
  Library& nccl = usable();
  ncclUniqueId id;
  nccl.check(nccl.ncclGetUniqueId(&id), "ncclGetUniqueId");
  return std::string(id.internal, sizeof(id.internal));
}

Communicator::Communicator(const std::string& unique_id, int world_size, int rank, int device) : device_(device) {
  Library& nccl = usable();
  if (unique_id.size() != sizeof(ncclUniqueId)) throw std::invalid_argument("unique_id: expected 128 bytes");
  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  cuda::Driver& d = cuda::Driver::get();
  cuda::DeviceScope scope;
  scope.use(device);  // NCCL binds the communicator to the current device
  nccl.check(nccl.ncclCommInitRank(&comm_, world_size, id, rank), "ncclCommInitRank");
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
  for (CUevent event : {start_, received_[0], received_[1], folded_[0], folded_[1]})
    if (event) d.cuEventDestroy(event);
  for (const InFlight& call : watched_) d.cuEventDestroy(call.end);
  for (CUevent event : spare_events_) d.cuEventDestroy(event);
  if (receiving_) d.cuStreamDestroy(receiving_);
}

void Communicator::abort() {
  std::lock_guard<std::mutex> lock(enqueue_);
  if (!comm_) return;
  cuda::DeviceScope scope;
  scope.use(device_);
  Library::get().ncclCommAbort(comm_);
  comm_ = nullptr;
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
  std::lock_guard<std::mutex> lock(enqueue_);
  if (!comm_) return "";
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = nccl.ncclCommGetAsyncError(comm_, &state);
  if (r != ncclSuccess) state = r;
  if (state == ncclSuccess || state == ncclInProgress) return "";
  return nccl.ncclGetErrorString(state);
}

void Communicator::send(CUdeviceptr source, size_t bytes, size_t chunk_bytes, int peer, CUstream stream) {
  Library& nccl = usable();
  std::lock_guard<std::mutex> lock(enqueue_);
  if (!comm_) throw cuda::CudaError("ncclSend: the NCCL communicator was aborted");
  if (chunk_bytes == 0) throw std::invalid_argument("chunk_bytes: must be positive");
  cuda::DeviceScope scope;
  scope.use(device_);
  for (size_t offset = 0; offset < bytes; offset += chunk_bytes)
    nccl.check(nccl.ncclSend(reinterpret_cast<const void*>(source + offset), std::min(chunk_bytes, bytes - offset),
                             ncclInt8, peer, comm_, stream),
               "ncclSend");
}

void Communicator::grow_staging(size_t bytes) {
  if (staging_ && staging_->bytes() >= bytes) return;
  cuda::Driver& d = cuda::Driver::get();
  for (int slot = 0; slot < 2; ++slot)  // the last call's folds may still read the old buffer
    if (folded_recorded_[slot]) d.check(d.cuEventSynchronize(folded_[slot]), "cuEventSynchronize");
  d.check(d.cuStreamSynchronize(receiving_), "cuStreamSynchronize");
  staging_.reset();
  staging_ = std::make_unique<cuda::DeviceBuffer>(bytes, device_);
}

void Communicator::gather(size_t bytes, size_t chunk_bytes, const std::vector<int>& peers, CUstream stream,
                          const Fold& fold) {
  Library& nccl = usable();
  std::lock_guard<std::mutex> lock(enqueue_);
  if (!comm_) throw cuda::CudaError("ncclRecv: the NCCL communicator was aborted");
  if (chunk_bytes == 0) throw std::invalid_argument("chunk_bytes: must be positive");
  cuda::Driver& d = cuda::Driver::get();
  cuda::DeviceScope scope;
  scope.use(device_);
  const size_t slot_bytes = chunk_bytes * peers.size();
  grow_staging(std::max<size_t>(2 * slot_bytes, 1));
  // Receives start once the caller's stream is here, and the last call's folds freed the slots.
  d.check(d.cuEventRecord(start_, stream), "cuEventRecord");
  d.check(d.cuStreamWaitEvent(receiving_, start_, 0), "cuStreamWaitEvent");
  for (int slot = 0; slot < 2; ++slot)
    if (folded_recorded_[slot]) d.check(d.cuStreamWaitEvent(receiving_, folded_[slot], 0), "cuStreamWaitEvent");
  std::exception_ptr failure;
  std::vector<CUdeviceptr> staged(peers.size());
  for (size_t offset = 0, chunk = 0; offset < bytes; offset += chunk_bytes, ++chunk) {
    const int slot = static_cast<int>(chunk % 2);
    const size_t length = std::min(chunk_bytes, bytes - offset);
    if (chunk >= 2) d.check(d.cuStreamWaitEvent(receiving_, folded_[slot], 0), "cuStreamWaitEvent");
    for (size_t i = 0; i < peers.size(); ++i) staged[i] = staging_->pointer() + slot * slot_bytes + i * chunk_bytes;
    if (!peers.empty()) {
      nccl.check(nccl.ncclGroupStart(), "ncclGroupStart");
      for (size_t i = 0; i < peers.size(); ++i)
        nccl.check(nccl.ncclRecv(reinterpret_cast<void*>(staged[i]), length, ncclInt8, peers[i], comm_, receiving_),
                   "ncclRecv");
      nccl.check(nccl.ncclGroupEnd(), "ncclGroupEnd");
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
  if (failure) std::rethrow_exception(failure);
}

}  // namespace tp::nccl
