// Registers the CUDA backend's executors (one per variant it runs).
#pragma once
#include "dispatch/executor.h"

namespace tp::cuda {
void register_cuda_executors(ExecutorTable& table);
}
