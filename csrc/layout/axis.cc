#include "layout/axis.h"

#include "errors.h"

namespace tp {

const std::vector<Axis>& all_axes() {
  static const std::vector<Axis> axes = {Axis::m,    Axis::laneid,    Axis::warpid,   Axis::tx,
                                         Axis::wgid, Axis::tid_in_wg, Axis::wid_in_wg};
  return axes;
}

const char* axis_name(Axis a) {
  switch (a) {
    case Axis::m: return "m";
    case Axis::laneid: return "laneid";
    case Axis::warpid: return "warpid";
    case Axis::tx: return "tx";
    case Axis::wgid: return "wgid";
    case Axis::tid_in_wg: return "tid_in_wg";
    case Axis::wid_in_wg: return "wid_in_wg";
  }
  return "?";
}

Axis axis_from_name(const std::string& name) {
  for (Axis a : all_axes()) {
    if (name == axis_name(a)) return a;
  }
  throw ValueError("axis: unknown axis '" + name +
                   "'; the axes are m, laneid, warpid, tx, wgid, tid_in_wg, wid_in_wg");
}

bool is_thread_axis(Axis a) { return a != Axis::m; }

long long thread_weight(Axis a) {
  switch (a) {
    case Axis::warpid:
    case Axis::wid_in_wg: return 32;
    case Axis::wgid: return 128;
    default: return 1;
  }
}

}  // namespace tp
