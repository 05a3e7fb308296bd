#include "backends/cpu/staging.h"

namespace tp {

HostStaging::HostStaging(const OperandStaging& s) : plan(s), element_bytes(dtype_size(s.dtype)) {
  if (s.kind == Staging::shared) {
    memory = s.layout->memory_layout();
    slots = s.layout->span();
    bool identity = slots == s.elements;
    offsets.resize(static_cast<size_t>(s.elements));
    for (long long e = 0; e < s.elements; ++e) {
      offsets[e] = memory_offset(memory, e);
      identity = identity && offsets[e] == e;
    }
    if (identity) offsets.clear();
  } else if (s.kind == Staging::registers) {
    slots_per_thread = s.place->slots;
    slots = static_cast<long long>(s.place->threads) * s.place->slots;
  }
}

}  // namespace tp
