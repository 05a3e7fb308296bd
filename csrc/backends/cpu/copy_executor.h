// The CPU executor of copy -> stage.
#pragma once
#include "dispatch/executor.h"

namespace tp {
void register_cpu_copy(ExecutorTable& table);
}
