#include "backends/cuda/launch_shape.h"

#include <algorithm>

#include "dispatch/architecture.h"
#include "errors.h"
#include "tileprim/staging.cuh"

namespace tp {

namespace {

// Shared memory a block takes before the frame stops adding instances: above 48 KiB the
// launcher opts in; at 100 KiB two blocks still share an SM's 227 KiB (sm_90).
constexpr long long kSharedPerBlockTarget = 100 * 1024;
constexpr int kBlockThreadsTarget = 256;  // a block of 256 threads: 8 per SM fill an H100's 2048
constexpr int kNamedBarriers = 15;        // bar.sync 1..15; 0 is __syncthreads
// Tiles a block stages at once when they are small: 32 KiB keeps 6 blocks on an SM, each
// with its whole run in flight; at most 64 rounds, so a block never holds a long serial tail.
constexpr long long kStagedBytesTarget = 32 * 1024;
constexpr int kMaxRounds = 64;
// Registers a thread loads straight from global memory for its tiles, all rounds at once:
// 64 bytes (16 floats) keep enough in flight at any occupancy without spilling. A thread
// whose tile is already a 16-byte vector takes one round (H100, float16 maps: 2.96-2.99 TB/s
// in one round against 2.93-2.94 in four; a warp's rows of one float per lane: 2.79-2.91 in
// sixteen rounds against 2.62-2.67 in four).
constexpr long long kDirectBytesTarget = 64;
constexpr int kMaxDirectRounds = 16;  // each round is the body unrolled once more
// Pipeline depth of asynchronously staged tiles: a block computes on the first part of its
// run while the rest arrives (wait_async takes 0..3 pending groups).
constexpr int kMaxStages = 4;
// Chunks of a run a warp's window holds (tp::WindowRun): the next three load while one is read.
constexpr int kWindowStages = 4;
// Tiles a block alone on its SM takes in turn where its next tile is copied in as it computes
// (FrameSpec::prefetch): the first round's load is the one not overlapped.
constexpr int kPrefetchRounds = 8;
// A map's slots a thread takes at once where it holds more: each chunk's registers unrolled,
// the chunks looped. Unrolled whole, a thread's 1024 bfloat16 silu took NVRTC minutes.
constexpr int kMapChunkSlots = 32;

long long align16(long long bytes) { return (bytes + 15) / 16 * 16; }

// Whether every thread's slots are a run of the tile's elements in order: thread t holds
// t * slots + k in slot k (a thread's replicas of an output may store nothing).
bool lane_runs(const FrameOperand& s) {
  const RegisterPlacement& p = *s.place;
  if (p.thread_private && p.threads > 1) return false;
  for (int t = 0; t < p.threads; ++t) {
    for (int k = 0; k < p.slots; ++k) {
      const int run = t * p.slots + k;
      if (s.load && p.element_at(t, k) != run) return false;
      const int stored = p.store[static_cast<size_t>(k) * p.threads + t];
      if (s.store && stored != run && stored != -1) return false;
    }
  }
  return true;
}

long long run_bytes(const FrameOperand& s) { return static_cast<long long>(s.place->slots) * dtype_size(s.dtype); }

// A register placement that tp::RunPlace names (every thread holding the whole tile at a scope
// of several threads is left to the staging area: a broadcast read, not a vector per lane).
bool in_closed_form(const FrameOperand& s) {
  return !(s.place->thread_private && s.place->threads > 1) && s.place->run.owners > 0;
}

// A placed tile the frame may copy into shared memory by its threads' runs (tp::copy_slots_async):
// every thread owns its runs (no replicas), whole runs of slots, and each thread's first slot holds
// an element (a padded tile's slots past its end repeat it).
bool prefetchable(const FrameOperand& s) {
  const RunForm& f = s.place->run;
  return s.kind == Staging::registers && s.load && !s.batch_broadcast && f.owners == s.place->threads &&
         s.place->slots % f.vec == 0 && (f.padded_elements == 0 || f.padded_elements >= static_cast<long long>(f.owners) * f.vec);
}

bool row_major(const FrameOperand& s) { return *s.layout == TileLayout::row_major(s.shape); }

long long skewed_bytes(const FrameOperand& s, long long tiles) {
  return align16(static_cast<long long>(skewed_span(static_cast<int>(std::min<long long>(tiles * s.elements, 1 << 30)))) *
                 dtype_size(s.dtype));
}

// A CTA's copy of a prefetched tile: its threads' slots of it.
long long prefetch_span(const FrameOperand& s, int cta_threads) {
  return align16(static_cast<long long>(s.place->slots) * cta_threads * dtype_size(s.dtype));
}

long long tile_span(const FrameOperand& s) { return align16(s.layout->span() * dtype_size(s.dtype)); }

// Chooses each operand's path, then the instances, rounds, parts, windows and chunks, and lays
// out the block's shared memory.
class Shaper {
 public:
  Shaper(const FrameSpec& spec, const std::string& arch) : spec_(spec), body_(spec.body) {
    s_.threads = spec.scope.threads;
    s_.ctas = spec.scope.ctas;
    s_.async = sm_version(arch) >= 80;
    s_.operands.resize(spec.operands.size());
    std::tie(s_.instances, s_.why) = scope_instances(spec.scope);
    if (spec.max_instances > 0 && s_.instances > spec.max_instances) {
      s_.why = std::to_string(spec.max_instances) + " instances of " + std::to_string(s_.threads) + " threads, not the " +
               std::to_string(s_.instances) + " the scope packs in a block, so that more warps fit the SM's registers";
      s_.instances = spec.max_instances;
    }
    for (size_t i = 0; i < spec.operands.size(); ++i) s_.operands[i] = {spec.operands[i].name, path_of(spec.operands[i])};
    s_.block_tiles = true;
    for (size_t i = 0; i < spec.operands.size(); ++i) {
      if (s_.operands[i].path == OperandPath::instance_tile && !row_major(spec.operands[i])) s_.block_tiles = false;
    }
    if (s_.block_tiles) {
      for (OperandLaunch& o : s_.operands) {
        if (o.path == OperandPath::instance_tile) o.path = OperandPath::block_tile;
      }
    }
    instances(arch);
    if (spec.folded_tiles > 0) {
      folds();
    } else {
      prefetch(arch);
      rounds();
    }
    windows(arch);
    chunk_map_slots();
    s_.clamped = body_.syncs_instances && s_.instances > 1 && spec.scope.kind != ScopeKind::warp;
    lay_out();
    words();
  }

  LaunchShape take() { return std::move(s_); }

 private:
  // Register operands whose threads hold runs of them skip the staging round trip where that
  // costs no coalescing: a run of at most one 16-byte vector moves straight between global
  // memory and registers (a warp's accesses are one contiguous span). A longer run is read in
  // place, as the body folds it, when staging it would not fit a full block in shared memory
  // (hundreds of elements per thread: the lines a warp touches are read whole by its next few
  // loads, and no array of them has to live in local memory). Shared tiles are each instance's
  // until every one proves row-major (then the block stages them).
  OperandPath path_of(const FrameOperand& s) const {
    if (s.moved_by_body) return OperandPath::body_moved;
    if (!s.staged()) return OperandPath::parameter;
    if (spec_.scope.ctas > 1) return cluster_path(s);
    if (s.batch_broadcast) return s.kind == Staging::shared ? OperandPath::once_tile : OperandPath::placed;
    if (s.kind == Staging::shared) return OperandPath::instance_tile;
    const bool runs = lane_runs(s);
    if (runs && run_bytes(s) <= 16) return OperandPath::direct;
    if (runs && body_.indexes_sources && s.load && !s.store && skewed_bytes(s, s_.instances) > kSharedPerBlockTarget) {
      return OperandPath::run;
    }
    if (!runs && in_closed_form(s)) return OperandPath::placed;
    return OperandPath::skewed;
  }

  // A cluster's operand: each CTA moves only its own lanes' elements, straight between global memory
  // and registers (the block's shared staging would hold the whole tile in every CTA).
  OperandPath cluster_path(const FrameOperand& s) const {
    if (s.kind == Staging::registers && in_closed_form(s)) {
      return !s.batch_broadcast && lane_runs(s) && run_bytes(s) <= 16 ? OperandPath::direct : OperandPath::placed;
    }
    throw ValueError(spec_.title + ": operand " + s.name + " at scope " + spec_.scope.str() +
                     ": a cluster moves register tiles whose placement has a closed form (the planner's spread "
                     "layouts), each CTA its own lanes' elements; this one has none");
  }

  template <class F> void each(OperandPath path, F f) const {
    for (size_t i = 0; i < spec_.operands.size(); ++i) {
      if (s_.operands[i].path == path) f(spec_.operands[i], i);
    }
  }
  long long spans(OperandPath path) const {
    long long bytes = 0;
    each(path, [&](const FrameOperand& s, size_t) { bytes += tile_span(s); });
    return bytes;
  }

  // The block's staging for `instances` instances of `rounds` tiles, each instance's tiles and
  // body area.
  long long shared_bytes(int instances, int rounds) const {
    const long long tiles = static_cast<long long>(instances) * rounds;
    long long bytes = 0;
    each(OperandPath::skewed, [&](const FrameOperand& s, size_t) { bytes += skewed_bytes(s, tiles); });
    each(OperandPath::block_tile, [&](const FrameOperand& s, size_t) { bytes += align16(tiles * s.elements * dtype_size(s.dtype)); });
    return bytes + instances * (spans(OperandPath::instance_tile) + spans(OperandPath::once_tile) + align16(body_.shared_bytes)) +
           prefetch_bytes();
  }

  // A CTA's copies of its prefetched tiles: its threads' slots of each.
  long long prefetch_bytes() const {
    long long bytes = 0;
    each(OperandPath::prefetched, [&](const FrameOperand& s, size_t) { bytes += prefetch_span(s, s_.threads / s_.ctas); });
    return bytes;
  }

  // Bytes a thread loads straight into registers per tile.
  long long direct_load_bytes() const {
    long long bytes = 0;
    each(OperandPath::direct, [&](const FrameOperand& s, size_t) { bytes += s.load ? run_bytes(s) : 0; });
    return bytes;
  }

  void instances(const std::string& arch) {
    const long long limit = sm_limits(arch).shared_per_block;
    if (shared_bytes(1, 1) > limit) {
      throw ValueError(spec_.title + ": shared memory: the kernel needs " + std::to_string(shared_bytes(1, 1)) +
                       " bytes per block for one scope instance; " + arch + " allows " + std::to_string(limit) +
                       ". Fix: smaller tiles (more batch_dims) or a scope with more threads");
    }
    const int wanted = s_.instances;
    while (s_.instances > 1 && shared_bytes(s_.instances, 1) > kSharedPerBlockTarget) --s_.instances;
    if (s_.instances < wanted) {
      s_.why = std::to_string(s_.instances) + " instances: " + std::to_string(shared_bytes(s_.instances + 1, 1)) +
               " bytes of shared memory for one more would pass " + std::to_string(kSharedPerBlockTarget);
    }
  }

  // Folded outputs: one instance a block taking its tiles one at a time, so that each element of a
  // folded output is added by the same thread in the tiles' order; each such output stored where its
  // thread writes it (a staging area's copy-out would write whole runs of tiles).
  void folds() {
    s_.folded_tiles = spec_.folded_tiles;
    s_.instances = 1;
    s_.why = "one instance taking " + std::to_string(s_.folded_tiles) + " tiles in turn, its folded outputs summed over them";
    for (size_t i = 0; i < spec_.operands.size(); ++i) {
      const OperandPath path = s_.operands[i].path;
      if (spec_.operands[i].folded && path != OperandPath::direct && path != OperandPath::placed &&
          path != OperandPath::body_moved) {
        throw ValueError(spec_.title + ": output " + spec_.operands[i].name + " is folded but moves by " + path_name(path) +
                         "; a folded output must be stored by the thread that holds it (direct, placed or by the body)");
      }
    }
  }

  // A block of one instance alone on its SM takes kPrefetchRounds tiles in turn, each round's placed
  // tiles copied into shared memory during the round before (asynchronously: sm_80 and later), as
  // many of them as the arch's shared memory holds. Not a cluster's CTAs: softmax rows of 65536 at
  // cluster(2x512) in registers, one CTA per SM, ran no faster so on an H200 (1.69 against 1.71 TB/s).
  void prefetch(const std::string& arch) {
    if (!spec_.prefetch || s_.instances != 1 || s_.ctas != 1 || !s_.async) return;
    for (size_t i = 0; i < spec_.operands.size(); ++i) {
      if (s_.operands[i].path == OperandPath::placed && prefetchable(spec_.operands[i])) {
        s_.operands[i].path = OperandPath::prefetched;
        if (shared_bytes(1, 1) > sm_limits(arch).shared_per_block) s_.operands[i].path = OperandPath::placed;
      }
    }
    if (!s_.any(OperandPath::prefetched)) return;
    s_.rounds = kPrefetchRounds;
    s_.why += "; it takes " + std::to_string(s_.rounds) +
              " tiles in turn, each round's copied into shared memory during the round before (" +
              std::to_string(prefetch_bytes()) + " bytes)";
  }

  // Small tiles: each instance takes several in turn, all staged by the whole block at once,
  // so that a block keeps enough bytes in flight and its launch is paid for. Registers loaded
  // straight from global memory bound the rounds too: every round's are loaded up front. A
  // run read in place keeps its own bytes in flight, and each round would be its fold again.
  void rounds() {
    if (s_.any(OperandPath::prefetched)) return;
    const long long direct_bytes = direct_load_bytes();
    const int max_rounds = direct_bytes > 0 ? kMaxDirectRounds : kMaxRounds;
    auto fits = [&](int rounds) {
      return rounds <= max_rounds && rounds * direct_bytes <= (direct_bytes >= 16 ? direct_bytes : kDirectBytesTarget) &&
             shared_bytes(s_.instances, rounds) <= kStagedBytesTarget;
    };
    const bool staged = shared_bytes(s_.instances, 1) > 0;
    if (s_.block_tiles && !s_.any(OperandPath::run) && (staged || direct_bytes > 0)) {
      while (fits(2 * s_.rounds)) s_.rounds *= 2;
    }
    if (s_.rounds > 1) {
      s_.why += "; each takes " + std::to_string(s_.rounds) + " tiles in turn, the block " +
                (staged ? "staging" : "loading") + " all " + std::to_string(s_.tiles_per_block()) + " at once";
      if (staged) s_.why += " (" + std::to_string(shared_bytes(s_.instances, s_.rounds)) + " bytes)";
    }
    if (s_.async && s_.block_tiles && s_.any(OperandPath::block_tile)) {
      s_.stages = std::min(s_.rounds, kMaxStages);
      if (s_.stages > 1) s_.why += ", in " + std::to_string(s_.stages) + " pipelined parts";
    }
  }

  // The tile's output is one element: a body folds each lane's run once, in order.
  bool one_output() const {
    int outputs = 0;
    bool single = false;
    for (const FrameOperand& s : spec_.operands) {
      outputs += s.output ? 1 : 0;
      single |= s.output && s.elements == 1;
    }
    return outputs == 1 && single;
  }

  // One run per lane, folded in order into one output: whole warps stream their lanes' runs
  // through a shared window (cp.async, sm_80 and later) instead of reading them in place,
  // where runs and tiles are whole 16-byte vectors (so that every run may be aligned).
  void windows(const std::string& arch) {
    int runs = 0;
    const FrameOperand* run = nullptr;
    each(OperandPath::run, [&](const FrameOperand& s, size_t) { ++runs, run = &s; });
    const int threads = s_.threads;
    if (!s_.async || runs != 1 || !one_output() || !(threads == 1 || threads % 32 == 0) ||
        s_.block_threads() % 32 != 0 || run_bytes(*run) % 16 != 0 || run->elements * dtype_size(run->dtype) % 16 != 0) {
      return;
    }
    const long long limit = sm_limits(arch).shared_per_block;
    s_.window_stages = kWindowStages;
    while (s_.window_stages > 1 && align16(shared_bytes(s_.instances, s_.rounds)) + window_bytes() > limit) --s_.window_stages;
    if (s_.window_stages < 2) {
      s_.window_stages = 0;
    } else {
      s_.why += "; whole warps stream their runs through a " + std::to_string(s_.window_stages) + "-chunk window (" +
                std::to_string(window_bytes()) + " bytes)";
    }
  }
  long long window_bytes() const {
    return s_.window_stages == 0 ? 0 : s_.block_threads() / 32 * s_.window_stages * tp::kWindowSlotBytes;
  }

  // A map over many slots per thread takes them a chunk at a time (the largest divisor of the
  // slots up to kMapChunkSlots, whole runs of every operand loaded where it lies), where every
  // register operand is staged, or loaded and stored where it lies, with the same slots: a warp's
  // rows of 8192 float32 held whole took 255 registers a thread and spilled (sm_90a, tp.exp with
  // batch_dims=1), 32 slots at a time 56.
  void chunk_map_slots() {
    int slots = 0, vec = 1;
    bool alike = true, others = false;
    for (size_t i = 0; i < spec_.operands.size(); ++i) {
      const OperandPath path = s_.operands[i].path;
      const FrameOperand& s = spec_.operands[i];
      if (path == OperandPath::skewed || (path == OperandPath::placed && !s.folded)) {
        const int p = s.place->slots;
        alike &= slots == 0 || p == slots;
        if (slots == 0) slots = p;
        if (path == OperandPath::placed) vec = std::max(vec, s.place->run.vec);
      } else if (path != OperandPath::parameter && path != OperandPath::body_moved) {
        others = true;
      }
    }
    if (!body_.maps_slots || slots == 0 || others || slots <= kMapChunkSlots || !alike) return;
    int chunk = kMapChunkSlots;
    while (chunk > 0 && (slots % chunk || chunk % vec)) --chunk;  // a run's vector whole in one chunk
    if (chunk == 0) return;
    s_.chunk_slots = chunk;
    s_.why += "; each thread maps its " + std::to_string(slots) + " slots " + std::to_string(s_.chunk_slots) + " at a time";
  }

  void lay_out() {
    const long long tiles = s_.tiles_per_block();
    long long offset = 0;
    each(OperandPath::skewed, [&](const FrameOperand& s, size_t i) {
      s_.operands[i].offset = offset;
      offset += skewed_bytes(s, tiles);
    });
    each(OperandPath::block_tile, [&](const FrameOperand& s, size_t i) {
      s_.operands[i].offset = offset;
      offset += align16(tiles * s.elements * dtype_size(s.dtype));
    });
    s_.instance_tiles_at = offset;
    for (OperandPath path : {OperandPath::instance_tile, OperandPath::once_tile}) {
      long long within = 0;
      each(path, [&](const FrameOperand& s, size_t i) {
        s_.operands[i].offset = within;
        within += tile_span(s);
      });
    }
    s_.instance_tiles_bytes = spans(OperandPath::instance_tile);
    s_.once_bytes = spans(OperandPath::once_tile);
    s_.once_at = s_.instance_tiles_at + s_.instances * s_.instance_tiles_bytes;
    s_.body_at = s_.once_at + s_.instances * s_.once_bytes;
    s_.body_bytes = align16(body_.shared_bytes);
    long long prefetch_at = s_.body_at + s_.instances * s_.body_bytes;
    each(OperandPath::prefetched, [&](const FrameOperand& s, size_t i) {
      s_.operands[i].offset = prefetch_at;
      prefetch_at += prefetch_span(s, s_.threads / s_.ctas);
    });
    s_.windows_at = align16(shared_bytes(s_.instances, s_.rounds));
    s_.folds_at = s_.windows_at + window_bytes();
    s_.shared_bytes = s_.folds_at;
    for (const FrameOperand& s : spec_.operands) s_.shared_bytes += folded_sum_bytes(s);
  }

  // In words, per staged operand: where the frame puts it and how it gets there.
  void words() {
    for (size_t i = 0; i < spec_.operands.size(); ++i) {
      const FrameOperand& s = spec_.operands[i];
      std::string how;
      switch (s_.operands[i].path) {
        case OperandPath::parameter: continue;
        case OperandPath::body_moved: how = "registers: the body moves it a chunk at a time (the program's rows in passes)"; break;
        case OperandPath::once_tile: how = "shared: the batch's one tile, staged once per instance"; break;
        case OperandPath::placed:
          how = s.batch_broadcast ? "registers: read from the batch's one tile where it lies"
                                  : "registers: loaded and stored where the tile lies (its placement in closed form, by vectors)";
          break;
        case OperandPath::prefetched:
          how = "registers: loaded and stored where the tile lies; each round's tile copied into shared memory "
                "(cp.async) during the round before";
          break;
        case OperandPath::block_tile:
          how = std::string("shared: the block's run of tiles, copied as it is") + (s_.async && s.load ? " (cp.async)" : "");
          break;
        case OperandPath::instance_tile: how = "shared: each instance's tile, moved element by element by its layout"; break;
        case OperandPath::direct: how = "registers: each thread's run of at most 16 bytes, straight from global memory"; break;
        case OperandPath::run:
          how = s_.window_stages > 0 ? "registers: each thread's run streamed through its warp's shared window"
                                     : "registers: each thread's run read in place as the body folds it";
          break;
        case OperandPath::skewed:
          how = "registers: through the block's skewed staging area (16-byte copies, then gathers by table)";
          break;
      }
      s_.staging.emplace_back(s.name, how);
    }
  }

  const FrameSpec& spec_;
  const KernelBody& body_;
  LaunchShape s_;
};

}  // namespace

const char* path_name(OperandPath path) {
  switch (path) {
    case OperandPath::parameter: return "parameter";
    case OperandPath::body_moved: return "body_moved";
    case OperandPath::direct: return "direct";
    case OperandPath::run: return "run";
    case OperandPath::placed: return "placed";
    case OperandPath::prefetched: return "prefetched";
    case OperandPath::skewed: return "skewed";
    case OperandPath::block_tile: return "block_tile";
    case OperandPath::instance_tile: return "instance_tile";
    case OperandPath::once_tile: return "once_tile";
  }
  return "";
}

bool LaunchShape::any(OperandPath path) const {
  return std::any_of(operands.begin(), operands.end(), [&](const OperandLaunch& o) { return o.path == path; });
}

DType folded_sum_dtype(const FrameOperand& s) { return s.dtype == DType::float64 ? DType::float64 : DType::float32; }

long long folded_sum_bytes(const FrameOperand& s) {
  return s.folded ? align16(s.elements * dtype_size(folded_sum_dtype(s))) : 0;
}

LaunchShape launch_shape(const FrameSpec& spec, const std::string& arch) { return Shaper(spec, arch).take(); }

// Instances per block before shared memory limits them, and why. Thread and warp instances
// need no barrier of their own; warpgroup and CTA instances each sync on a named barrier
// (1 + instance), so a CTA instance must be whole warps and a block holds at most 15.
std::pair<int, std::string> scope_instances(const ExecScope& scope) {
  const int threads = scope.threads;
  switch (scope.kind) {
    case ScopeKind::thread: return {128, "128 threads of one tile each"};
    case ScopeKind::warp: return {kBlockThreadsTarget / 32, std::to_string(kBlockThreadsTarget / 32) + " warps of one tile each"};
    case ScopeKind::cluster:
      return {1, "one instance per cluster of " + std::to_string(scope.ctas) + " CTAs of " +
                     std::to_string(scope.cta_threads()) + " threads (a block is one CTA of it)"};
    default: break;
  }
  if (threads % 32 != 0) return {1, "a CTA of " + std::to_string(threads) + " threads is not whole warps: one per block"};
  const int n = std::max(1, std::min(kNamedBarriers, kBlockThreadsTarget / threads));
  if (n == 1) return {1, "one " + std::to_string(threads) + "-thread instance fills a block"};
  return {n, std::to_string(n) + " instances of " + std::to_string(threads) +
                 " threads, each synced by its own named barrier"};
}

}  // namespace tp
