// The named axes a layout places elements on: the memory axis `m` and the thread axes.
#pragma once
#include <string>
#include <vector>

namespace tp {

enum class Axis { m, laneid, warpid, tx, wgid, tid_in_wg, wid_in_wg };

const std::vector<Axis>& all_axes();
const char* axis_name(Axis a);
Axis axis_from_name(const std::string& name);  // throws ValueError naming the known axes
bool is_thread_axis(Axis a);

// A thread axis coordinate times its weight is a thread's index within a CTA: laneid 1,
// warpid 32, tx 1, wgid 128, tid_in_wg 1, wid_in_wg 32 (so laneid + 32*wid_in_wg equals
// tid_in_wg, and 128*wgid + tid_in_wg equals tx).
long long thread_weight(Axis a);

}  // namespace tp
