// Moving a tile between its logical order and where a scope instance holds it: registers
// ([thread][slot], through a RegisterPlacement) or one shared-memory tile (through the
// layout's memory offsets). Slots that hold no element are poisoned with NaN.
#pragma once
#include <vector>

#include "layout/placement.h"
#include "layout/tile_layout.h"
#include "tileprim/layout.cuh"
#include "tileprim/numeric.cuh"

namespace tp {

template <class T> std::vector<T> poisoned(size_t n) { return std::vector<T>(n, limits<T>::quiet_nan()); }

template <class T> std::vector<T> load_registers(const RegisterPlacement& p, const T* tile) {
  std::vector<T> regs = poisoned<T>(static_cast<size_t>(p.threads) * p.slots);
  for (int s = 0; s < p.slots; ++s) {
    for (int t = 0; t < p.threads; ++t) {
      const int e = p.element_at(t, s);
      if (e >= 0) regs[static_cast<size_t>(t) * p.slots + s] = tile[e];
    }
  }
  return regs;
}

template <class T> void store_registers(const RegisterPlacement& p, const std::vector<T>& regs, T* tile) {
  for (int s = 0; s < p.slots; ++s) {
    for (int t = 0; t < p.threads; ++t) {
      const int e = p.store[static_cast<size_t>(s) * p.threads + t];
      if (e >= 0) tile[e] = regs[static_cast<size_t>(t) * p.slots + s];
    }
  }
}

template <class T> std::vector<T> load_memory(const TileLayout& layout, const T* tile) {
  const MemLayout L = layout.memory_layout();
  std::vector<T> mem = poisoned<T>(static_cast<size_t>(layout.span()));
  for (long long e = 0; e < layout.size(); ++e) mem[memory_offset(L, e)] = tile[e];
  return mem;
}

template <class T> void store_memory(const TileLayout& layout, const std::vector<T>& mem, T* tile) {
  const MemLayout L = layout.memory_layout();
  for (long long e = 0; e < layout.size(); ++e) tile[e] = mem[memory_offset(L, e)];
}

}  // namespace tp
