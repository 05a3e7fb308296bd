#include "backends/cpu/packed_tiles.h"

namespace tp {

SlotTable::SlotTable(const FoldView& v) : spatial(v.spatial), reduce(v.reduce) {
  for (int k = 0; k < spatial; ++k) {
    dst.push_back(v.dst_slot(k));
    for (int j = 0; j < reduce; ++j) src.push_back(v.src_slot(k, j));
  }
}

SlotMap::SlotMap(const HostStaging& h) : slots(h.slots) {
  auto add_load = [&](long long slot, long long e) {
    if (!load.empty() && load.back().slot + load.back().length == slot &&
        load.back().element + load.back().length == e) {
      ++load.back().length;
    } else {
      load.push_back({slot, e, 1});
    }
  };
  if (h.plan.kind == Staging::shared) {
    for (long long e = 0; e < h.plan.elements; ++e) {
      add_load(memory_offset(h.memory, e), e);
      store.emplace_back(memory_offset(h.memory, e), e);
    }
  } else {
    const RegisterPlacement& p = *h.plan.place;  // thread scope: one thread
    for (int s = 0; s < p.slots; ++s) {
      if (p.load[s] >= 0) add_load(s, p.load[s]);
      if (p.store[s] >= 0) store.emplace_back(s, p.store[s]);
    }
  }
  long long loaded = 0;
  for (const Run& r : load) loaded += r.length;
  loads_every_slot = loaded == slots;
}

}  // namespace tp
