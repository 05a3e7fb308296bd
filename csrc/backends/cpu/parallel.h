// Host work spread over the machine's cores: items [0, count) in contiguous ranges, one per
// thread, when there is enough work to pay for the threads. The calling thread takes a range
// too and polls for an interrupt (RunArgs::interrupted, which may need the GIL) about every
// 20 ms; the others stop at their next item once it asks them to.
#pragma once
#include <functional>

namespace tp {

// body(begin, end, keep_going): keep_going() is false once the run should stop. Exceptions in
// any range reach the caller, after every thread has finished; an interrupt throws Interrupted.
void parallel_for(long long count, long long cost_per_item, const std::function<bool()>& interrupted,
                  const std::function<void(long long, long long, const std::function<bool()>&)>& body);

}  // namespace tp
