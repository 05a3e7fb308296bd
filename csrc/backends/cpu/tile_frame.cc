#include "backends/cpu/tile_frame.h"

#include <cstddef>

#include "backends/cpu/parallel.h"

#include "ops/host_types.h"

namespace tp {

struct TypedStaging {
  void (*in)(const HostStaging&, const void* tile, void* buf);
  void (*out)(const HostStaging&, const void* buf, void* tile);
  void (*poison)(void* buf, long long n);
};

namespace {

template <class T> const TypedStaging* moves_for() {
  static const TypedStaging m = {
      [](const HostStaging& h, const void* tile, void* buf) {
        stage_in(h, static_cast<const T*>(tile), static_cast<T*>(buf));
      },
      [](const HostStaging& h, const void* buf, void* tile) {
        stage_out(h, static_cast<const T*>(buf), static_cast<T*>(tile));
      },
      [](void* buf, long long n) { poison(static_cast<T*>(buf), n); }};
  return &m;
}

}  // namespace

HostTileRunner::HostTileRunner(const Plan& plan, HostBody body)
    : inputs_(static_cast<int>(plan.call.inputs.size())), body_(std::move(body)) {
  for (const OperandStaging& s : plan.staging) {
    staging_.emplace_back(s);
    const TypedStaging* m = nullptr;
    with_host_value(s.dtype, [&](auto tag) { m = moves_for<typename decltype(tag)::type>(); });
    moves_.push_back(m);
  }
}

void HostTileRunner::run(const RunArgs& args) const {
  long long cost = 1;
  for (const HostStaging& h : staging_) cost += h.plan.elements;
  parallel_for(args.tiles, cost, args.interrupted, [&](long long begin, long long end, const auto& keep_going) {
    run_tiles(args, begin, end, keep_going);
  });
}

void HostTileRunner::run_tiles(const RunArgs& args, long long begin, long long end,
                               const std::function<bool()>& keep_going) const {
  // buffers per range, so concurrent ranges and calls of one plan never share them
  std::vector<std::vector<std::max_align_t>> buffers(staging_.size());
  HostTile tile;
  tile.in.assign(inputs_, nullptr);
  tile.in_stride.assign(inputs_, 0);
  tile.scalars = args.scalars.data();
  for (size_t k = 0; k < staging_.size(); ++k) {
    const HostStaging& h = staging_[k];
    if (h.plan.kind == Staging::scalar || h.plan.kind == Staging::global) continue;
    const size_t bytes = static_cast<size_t>(h.slots) * h.element_bytes;
    buffers[k].resize((bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t) + 1);
    void* buf = buffers[k].data();
    if (h.plan.operand < 0) {
      tile.out = buf;
      tile.out_stride = h.slots_per_thread;
    } else {
      tile.in[h.plan.operand] = buf;
      tile.in_stride[h.plan.operand] = h.slots_per_thread;
    }
  }
  auto global = [&](const HostStaging& h, long long t) {
    const std::uintptr_t base = h.plan.operand < 0 ? args.output.data : args.inputs[h.plan.operand].data;
    return reinterpret_cast<unsigned char*>(base) + static_cast<size_t>(t * h.plan.elements) * h.element_bytes;
  };
  for (long long t = begin; t < end && keep_going(); ++t) {
    for (size_t k = 0; k < staging_.size(); ++k) {
      const HostStaging& h = staging_[k];
      if (h.plan.kind == Staging::scalar) continue;
      if (h.plan.kind == Staging::global) {  // read where it lies, as the GPU's body reads it
        tile.in[h.plan.operand] = global(h, t);
        continue;
      }
      if (h.plan.load) {
        moves_[k]->in(h, global(h, t), buffers[k].data());
      } else {
        moves_[k]->poison(buffers[k].data(), h.slots);
      }
    }
    body_(tile);
    for (size_t k = 0; k < staging_.size(); ++k) {
      const HostStaging& h = staging_[k];
      if (h.plan.store && h.plan.kind != Staging::global) moves_[k]->out(h, buffers[k].data(), global(h, t));
    }
  }
}

}  // namespace tp
