// The CUDA backend's treduce executors: root_pull and scatter_gather (treduce_executor.cc),
// chain (treduce_executor_chain.cc).
#pragma once
#include <memory>
#include <string>

#include "dispatch/executor.h"

namespace tp::cuda {

void register_cuda_treduce(ExecutorTable& table);

std::unique_ptr<Executor> chain_executor();

// ValueError unless every rank's tensor lies on a GPU.
void require_device_ranks(const Plan& plan);

// The top of a treduce kernel's source: what it is for, and the 16-bit types it needs.
std::string treduce_kernel_head(const Plan& plan, DType dtype);

}  // namespace tp::cuda
