// Registers the CPU backend's treduce executors (root_pull, scatter_gather and chain).
#pragma once
#include "dispatch/executor.h"

namespace tp {
void register_cpu_treduce(ExecutorTable& table);
}
