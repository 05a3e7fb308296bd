// Moving one tile between its logical order in global memory and where a scope instance
// holds it while the body runs: registers ([thread][slot], through a RegisterPlacement) or
// one shared-memory tile (through the layout's memory offsets). Slots that hold no element
// are poisoned with NaN, so an algorithm that reads one shows it.
#pragma once
#include <cstring>
#include <vector>

#include "dispatch/plan.h"
#include "layout/placement.h"
#include "tileprim/layout.cuh"
#include "tileprim/numeric.cuh"

namespace tp {

// An operand's staging with what moving it needs, computed once per plan.
struct HostStaging {
  OperandStaging plan;
  MemLayout memory{};     // shared: the tile's memory layout
  long long slots = 0;    // registers: threads * slots per thread; shared: the layout's span
  int slots_per_thread = 0;
  int element_bytes = 0;
  // shared: each element's offset (memory_offset, computed once); empty when offset == element
  // and the tile has no other slots, so staging is a plain copy
  std::vector<long long> offsets;

  explicit HostStaging(const OperandStaging& s);
};

template <class T> void poison(T* buf, long long n) {
  for (long long i = 0; i < n; ++i) buf[i] = limits<T>::quiet_nan();
}

template <class T> void stage_in(const HostStaging& h, const T* tile, T* buf) {
  if (h.plan.kind == Staging::shared) {
    if (h.offsets.empty()) {
      std::memcpy(buf, tile, static_cast<size_t>(h.plan.elements) * sizeof(T));
      return;
    }
    poison(buf, h.slots);
    for (long long e = 0; e < h.plan.elements; ++e) buf[h.offsets[e]] = tile[e];
    return;
  }
  poison(buf, h.slots);
  const RegisterPlacement& p = *h.plan.place;
  for (int t = 0; t < p.threads; ++t) {
    for (int s = 0; s < p.slots; ++s) {
      const int e = p.element_at(t, s);
      if (e >= 0) buf[static_cast<long long>(t) * p.slots + s] = tile[e];
    }
  }
}

template <class T> void stage_out(const HostStaging& h, const T* buf, T* tile) {
  if (h.plan.kind == Staging::shared) {
    if (h.offsets.empty()) {
      std::memcpy(tile, buf, static_cast<size_t>(h.plan.elements) * sizeof(T));
      return;
    }
    for (long long e = 0; e < h.plan.elements; ++e) tile[e] = buf[h.offsets[e]];
    return;
  }
  const RegisterPlacement& p = *h.plan.place;
  for (int s = 0; s < p.slots; ++s) {
    for (int t = 0; t < p.threads; ++t) {
      const int e = p.store[static_cast<size_t>(s) * p.threads + t];
      if (e >= 0) tile[e] = buf[static_cast<long long>(t) * p.slots + s];
    }
  }
}

}  // namespace tp
