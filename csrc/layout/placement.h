// Where a register tile's elements sit: which register of which thread of the scope holds
// each element. Built once per call from the layout; the CPU backend stages through these
// tables and the generated kernels carry them.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layout/exec_scope.h"
#include "layout/tile_layout.h"

namespace tp {

// A placement in closed form (tp::RunPlace): lane l holds in slot s element
// e = ((s / vec) * owners + l % owners) * vec + s % vec, lanes < owners write back; a padded
// placement (padded_elements > 0) holds nothing where e >= padded_elements. owners 0: none.
struct RunForm {
  int owners = 0, vec = 0;
  long long padded_elements = 0;
};

struct RegisterPlacement {
  int threads = 1;
  int slots = 1;  // registers per thread
  // [slot * threads + thread] -> element held there, or -1. Every replica is listed.
  std::vector<int> load;
  // The same, but only at each element's first position: the one thread that writes it back.
  std::vector<int> store;
  // No thread axes at a scope of several threads: every thread holds the whole tile.
  bool thread_private = false;
  // The tables in closed form, found once when the placement is made (every kernel and staging
  // that places the tile asks for it).
  RunForm run;

  int element_at(int thread, int slot) const { return load[static_cast<size_t>(slot) * threads + thread]; }
  // Every thread holds the whole tile of `elements`, element s in its slot s (a value per row
  // broadcast to the scope's threads, which each read with no exchange).
  bool whole_in_every_thread(long long elements) const;
};

// Throws ValueError naming `arg` when the layout uses an axis the scope lacks, reaches a
// thread the scope does not have, or puts two elements in one register; LimitError when a thread
// would hold more than 1024 slots (or the tables would pass 2^22 entries). The last few
// placements are remembered, and shared rather than copied: a plan, and each scope the planner
// tries, place a tile many times.
std::shared_ptr<const RegisterPlacement> place_in_registers(const TileLayout& layout, const ExecScope& scope,
                                                            const std::string& arg);

}  // namespace tp
