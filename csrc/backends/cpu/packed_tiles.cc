#include "backends/cpu/packed_tiles.h"

namespace tp {

SlotTable::SlotTable(const FoldView& v) : spatial(v.spatial), reduce(v.reduce) {
  for (int k = 0; k < spatial; ++k) {
    dst.push_back(v.dst_slot(k));
    for (int j = 0; j < reduce; ++j) src.push_back(v.src_slot(k, j));
  }
}

SlotMap::SlotMap(const HostStaging& h) : slots(h.slots) {
  if (h.plan.kind == Staging::shared) {
    for (long long e = 0; e < h.plan.elements; ++e) {
      load.emplace_back(memory_offset(h.memory, e), e);
      store.emplace_back(memory_offset(h.memory, e), e);
    }
    return;
  }
  const RegisterPlacement& p = *h.plan.place;  // thread scope: one thread
  for (int s = 0; s < p.slots; ++s) {
    if (p.load[s] >= 0) load.emplace_back(s, p.load[s]);
    if (p.store[s] >= 0) store.emplace_back(s, p.store[s]);
  }
}

}  // namespace tp
