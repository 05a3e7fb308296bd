// Registers the CPU backend's executors (one per variant it runs).
#pragma once
#include "dispatch/executor.h"

namespace tp {
void register_cpu_executors(ExecutorTable& table);
}
