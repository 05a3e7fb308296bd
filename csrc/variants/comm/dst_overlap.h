// treduce's one rule for where dst may lie (DESIGN.md section 3): no byte of dst may be a byte
// of a rank's source on its device, save where dst is the root's tensor itself (same address
// and strides: a reduction in place, each chunk of the root read before it is stored). Every
// path checks it here: the first call of a signature, its repeats (Python's memo and
// RepeatedCollective) and the root's call across processes.
#pragma once
#include <cstdint>
#include <vector>

#include "dispatch/op_call.h"

namespace tp::treduce {

// The ranks whose source at pointers[r] the dst at `dst_pointer` may meet against the rule:
// the non-root ones ascending, then the root. Extents decide (a tensor's bytes from its lowest
// to its highest element); where both are NumPy arrays the caller may look closer
// (np.shares_memory). pointers has one entry per rank; 0 is a rank whose data this process
// does not hold (nothing of it to meet).
std::vector<int> dst_overlaps(const std::vector<TileRef>& ranks, const TileRef& dst, const std::uintptr_t* pointers,
                              std::uintptr_t dst_pointer, int root);

}  // namespace tp::treduce
