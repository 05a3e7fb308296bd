// Registers the CUDA backend's treduce executors (root_pull and scatter_gather, one process).
#pragma once
#include "dispatch/executor.h"

namespace tp::cuda {
void register_cuda_treduce(ExecutorTable& table);
}
