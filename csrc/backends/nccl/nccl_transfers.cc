// The NCCL transport's transfers (nccl_communicator.h): root_pull's send and gather,
// scatter_gather's exchange of shards, the chain's exchange along the fold order. Each enqueues
// its NCCL groups under the enqueue lock, timed (timings()); one that cannot enqueue all its part
// aborts the communicator, so its peers fail rather than wait.
#include <algorithm>
#include <stdexcept>

#include "backends/cuda/driver.h"
#include "backends/nccl/nccl_communicator.h"
#include "backends/nccl/nccl_library.h"

namespace tp::nccl {

void Communicator::send(CUdeviceptr source, size_t bytes, size_t chunk_bytes, int peer, CUstream stream,
                        double timeout_s) {
  Library& nccl = Library::usable();
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  if (!comm_) throw cuda::CudaError("ncclSend: the NCCL communicator was aborted");
  if (chunk_bytes == 0) throw std::invalid_argument("chunk_bytes: must be positive");
  cuda::DeviceScope scope;
  scope.use(device_);
  timings_["calls"] += 1;
  try {  // every chunk in one group: the root's receives, chunk by chunk, match them in order
    group(
        [&] {
          for (size_t offset = 0; offset < bytes; offset += chunk_bytes)
            nccl.check(nccl.ncclSend(reinterpret_cast<const void*>(source + offset),
                                     std::min(chunk_bytes, bytes - offset), ncclInt8, peer, comm_, stream),
                       "ncclSend");
        },
        deadline_after(timeout_s));
  } catch (const std::exception& e) {
    abandon(false, e);
  }
}

void Communicator::gather(size_t bytes, size_t chunk_bytes, const std::vector<int>& peers, CUstream stream,
                          const Fold& fold_chunk, double timeout_s) {
  Library& nccl = Library::usable();
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  if (!comm_) throw cuda::CudaError("ncclRecv: the NCCL communicator was aborted");
  if (chunk_bytes == 0) throw std::invalid_argument("chunk_bytes: must be positive");
  cuda::Driver& d = cuda::Driver::get();
  cuda::DeviceScope scope;
  scope.use(device_);
  timings_["calls"] += 1;
  const size_t slot_bytes = chunk_bytes * peers.size();
  const auto deadline = deadline_after(timeout_s);
  std::exception_ptr failure;
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
        group(
            [&] {
              for (size_t i = 0; i < peers.size(); ++i)
                nccl.check(nccl.ncclRecv(reinterpret_cast<void*>(staged[i]), length, ncclInt8, peers[i], comm_,
                                         receiving_),
                           "ncclRecv");
            },
            deadline);
      }
      d.check(d.cuEventRecord(received_[slot], receiving_), "cuEventRecord");
      d.check(d.cuStreamWaitEvent(stream, received_[slot], 0), "cuStreamWaitEvent");
      fold([&] { fold_chunk(offset, length, staged); }, failure);
      d.check(d.cuEventRecord(folded_[slot], stream), "cuEventRecord");
      folded_recorded_[slot] = true;
    }
  } catch (const std::exception& e) {
    abandon(false, e);
  }
  if (failure) std::rethrow_exception(failure);
}

void Communicator::exchange_shards(CUdeviceptr source, CUdeviceptr out, const std::vector<size_t>& bounds,
                                   const std::vector<int>& workers, int root, size_t step_bytes, CUstream stream,
                                   const ShardFold& shard_fold, double timeout_s) {
  Library& nccl = Library::usable();
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  if (!comm_) throw cuda::CudaError("ncclSend: the NCCL communicator was aborted");
  if (step_bytes == 0) throw std::invalid_argument("step_bytes: must be positive");
  if (bounds.size() != workers.size() + 1) throw std::invalid_argument("bounds: one more than the workers");
  cuda::Driver& d = cuda::Driver::get();
  cuda::DeviceScope scope;
  scope.use(device_);
  timings_["calls"] += 1;
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
      const size_t receiving = folds && step < steps ? slice(me, step).second : 0;
      group(
          [&] {
            for (size_t k = 0; step < steps && k < workers.size(); ++k) {
              const auto [offset, length] = slice(k, step);
              if (workers[k] != rank_ && length)
                nccl.check(nccl.ncclSend(reinterpret_cast<const void*>(source + offset), length, ncclInt8, workers[k],
                                         comm_, stream),
                           "ncclSend");
            }
            for (size_t i = 0; receiving && i < others.size(); ++i)
              nccl.check(nccl.ncclRecv(reinterpret_cast<void*>(staged + i * step_bytes), receiving, ncclInt8,
                                       others[i], comm_, stream),
                         "ncclRecv");
            if (folds && step > 0 && slice(me, step - 1).second)
              nccl.check(nccl.ncclSend(reinterpret_cast<const void*>(result), slice(me, step - 1).second, ncclInt8,
                                       root, comm_, stream),
                         "ncclSend");
            for (size_t k = 0; rank_ == root && step > 0 && k < workers.size(); ++k) {
              const auto [offset, length] = slice(k, step - 1);
              if (length)
                nccl.check(nccl.ncclRecv(reinterpret_cast<void*>(out + offset), length, ncclInt8, workers[k], comm_,
                                         stream),
                           "ncclRecv");
            }
          },
          deadline);
      if (!receiving) continue;
      const size_t offset = slice(me, step).first;
      for (size_t i = 0; i < others.size(); ++i) copies[static_cast<size_t>(others[i])] = staged + i * step_bytes;
      copies[static_cast<size_t>(rank_)] = source + offset;
      fold([&] { shard_fold(offset, receiving, copies, result); }, failure);
      if (failure)  // the root gets all-ones bytes (NaN, or -1) for this shard, not stale staging
        d.check(d.cuMemsetD8Async(result, 0xFF, receiving, stream), "cuMemsetD8Async");
    }
    if (folds) {
      d.check(d.cuEventRecord(folded_[0], stream), "cuEventRecord");
      folded_recorded_[0] = true;
    }
  } catch (const std::exception& e) {
    abandon(false, e);
  }
  if (failure) std::rethrow_exception(failure);
}

void Communicator::chain(CUdeviceptr source, CUdeviceptr out, size_t bytes, size_t chunk_bytes,
                         const std::vector<int>& order, CUstream stream, const LinkFold& link_fold, double timeout_s) {
  Library& nccl = Library::usable();
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  if (!comm_) throw cuda::CudaError("ncclSend: the NCCL communicator was aborted");
  if (chunk_bytes == 0) throw std::invalid_argument("chunk_bytes: must be positive");
  const auto at = std::find(order.begin(), order.end(), rank_);
  if (order.size() != static_cast<size_t>(world_size_) || world_size_ < 2 || at == order.end())
    throw std::invalid_argument("order: every rank of the communicator (2 or more), the root first");
  cuda::Driver& d = cuda::Driver::get();
  cuda::DeviceScope scope;
  scope.use(device_);
  timings_["calls"] += 1;
  const long long n = world_size_, position = at - order.begin();
  const long long chunks = static_cast<long long>((bytes + chunk_bytes - 1) / chunk_bytes);
  const int prev = order[(position + n - 1) % n], next = order[(position + 1) % n];  // the root's prev: the last
  const auto length = [&](long long c) { return std::min(chunk_bytes, bytes - static_cast<size_t>(c) * chunk_bytes); };
  const auto deadline = deadline_after(timeout_s);
  std::exception_ptr failure;
  try {
    CUdeviceptr in[2] = {0, 0}, result[2] = {0, 0};  // a position past the root's: received partials, its own
    if (position > 0 && chunks > 0) {
      grow_staging(4 * chunk_bytes);
      for (int s = 0; s < 2; ++s) {
        in[s] = staging_->pointer() + s * chunk_bytes;
        result[s] = staging_->pointer() + (2 + s) * chunk_bytes;
      }
      if (folded_recorded_[0]) d.check(d.cuStreamWaitEvent(stream, folded_[0], 0), "cuStreamWaitEvent");
    }
    for (long long t = 0; t < chunks + n - 1; ++t) {
      // group t: the root sends chunk t and receives the result of chunk t - (n - 1); position p
      // receives chunk t - (p - 1) and sends its fold of chunk t - p
      const long long receives = position > 0 ? t - (position - 1) : t - (n - 1);
      const long long sends = t - position;
      const bool receiving = receives >= 0 && receives < chunks, sending = sends >= 0 && sends < chunks;
      if (receiving || sending) {
        group(
            [&] {
              if (sending) {
                const CUdeviceptr from = position == 0 ? source + sends * chunk_bytes : result[sends % 2];
                nccl.check(nccl.ncclSend(reinterpret_cast<const void*>(from), length(sends), ncclInt8, next, comm_,
                                         stream),
                           "ncclSend");
              }
              if (receiving) {
                const CUdeviceptr into = position == 0 ? out + receives * chunk_bytes : in[receives % 2];
                nccl.check(nccl.ncclRecv(reinterpret_cast<void*>(into), length(receives), ncclInt8, prev, comm_,
                                         stream),
                           "ncclRecv");
              }
            },
            deadline);
      }
      if (position == 0 || !receiving) continue;
      const size_t offset = static_cast<size_t>(receives) * chunk_bytes;
      fold([&] { link_fold(offset, length(receives), in[receives % 2], result[receives % 2]); }, failure);
      if (failure)  // the next ranks get all-ones bytes (NaN, or -1), not stale staging
        d.check(d.cuMemsetD8Async(result[receives % 2], 0xFF, length(receives), stream), "cuMemsetD8Async");
    }
    if (position > 0 && chunks > 0) {
      d.check(d.cuEventRecord(folded_[0], stream), "cuEventRecord");
      folded_recorded_[0] = true;
    }
  } catch (const std::exception& e) {
    abandon(false, e);
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace tp::nccl
