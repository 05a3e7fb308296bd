// The CPU executor of gather -> gather.
#pragma once
#include "dispatch/executor.h"

namespace tp {
void register_cpu_gather(ExecutorTable& table);
}
