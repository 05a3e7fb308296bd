// The shape of a step's result, NumPy's rules, for the planner and for tracing (Python's Tile
// shapes come from here: _C.broadcast_shapes, _C.reduced_shape).
#include <algorithm>

#include "errors.h"
#include "program/program_plan.h"

namespace tp {

namespace {
std::string at(const std::string& where) { return where.empty() ? "" : where + ": "; }
}  // namespace

std::vector<long long> broadcast_shapes(const std::vector<std::vector<long long>>& shapes, const std::string& where,
                                        const std::string& op) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<long long> out(rank, 1);
  for (const auto& s : shapes) {
    for (size_t k = 0; k < s.size(); ++k) {
      long long& d = out[rank - 1 - k];
      const long long e = s[s.size() - 1 - k];
      if (d == 1) {
        d = e;
      } else if (e != 1 && e != d) {
        std::string list;
        for (const auto& t : shapes) list += (list.empty() ? "" : " and ") + shape_str(t);
        throw ValueError(at(where) + op + ": tile shapes " + list + " do not broadcast");
      }
    }
  }
  return out;
}

std::vector<long long> reduced_shape(const std::vector<long long>& shape, std::vector<int>& axes, bool keepdims,
                                     const std::string& where) {
  const int rank = static_cast<int>(shape.size());
  const int dims = std::max(rank, 1);  // a tile of one value (shape ()) reduces over its one dim
  std::vector<bool> reduced(static_cast<size_t>(dims), false);
  for (int& a : axes) {
    if (a < -dims || a >= dims) {
      throw ValueError(at(where) + "axes: axis " + std::to_string(a) + " is out of range for a tile of rank " +
                       std::to_string(rank));
    }
    if (a < 0) a += dims;
    reduced[a] = true;
  }
  std::vector<long long> out;
  for (int d = 0; d < rank; ++d) {
    if (!reduced[d]) out.push_back(shape[d]);
    else if (keepdims) out.push_back(1);
  }
  return out;
}

}  // namespace tp
