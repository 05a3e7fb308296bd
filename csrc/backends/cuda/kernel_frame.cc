#include "backends/cuda/kernel_frame.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

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
// A map's slots a thread takes at once where it holds more: each chunk's registers unrolled,
// the chunks looped. Unrolled whole, a thread's 1024 bfloat16 silu took NVRTC minutes.
constexpr int kMapChunkSlots = 32;

long long align16(long long bytes) { return (bytes + 15) / 16 * 16; }

// Every line of `text` after `pad` (the instance's statements sit one loop deeper than they
// are written).
std::string indented(const std::string& text, const std::string& pad) {
  std::istringstream lines(text);
  std::ostringstream os;
  for (std::string line; std::getline(lines, line);) os << (line.empty() || line[0] == '#' ? "" : pad) << line << "\n";
  return os.str();
}

// `in_memory`: indexed at run time, so the device holds it (a constexpr array is host-only).
std::string int_table(const std::string& name, const std::vector<int>& values, bool in_memory) {
  std::ostringstream os;
  os << (in_memory ? "__device__ constexpr int " : "constexpr int ") << name << "["
     << std::max<size_t>(values.size(), 1) << "] = {";
  for (size_t i = 0; i < values.size(); ++i) os << (i ? (i % 32 ? ", " : ",\n    ") : "") << values[i];
  if (values.empty()) os << "-1";
  os << "};\n";
  return os.str();
}

// A placement's table, indexed [slot] when every thread reads the same (one thread, or a
// thread-private tile), else [slot * kThreads + lane].
bool per_slot(const RegisterPlacement& p, bool loads) { return p.threads == 1 || (loads && p.thread_private); }

// A register placement that tp::RunPlace names (every thread holding the whole tile at a scope
// of several threads is left to the staging area: a broadcast read, not a vector per lane).
bool in_closed_form(const FrameOperand& s) {
  return !(s.place->thread_private && s.place->threads > 1) && run_form(*s.place).first > 0;
}

class Frame {
 public:
  Frame(const FrameSpec& spec, const std::string& arch)
      : spec_(spec), body_(spec.body), scope_(spec.scope), threads_(spec.scope.threads),
        async_(sm_version(arch) >= 80) {
    std::tie(instances_, why_) = scope_instances(scope_);
    for (const FrameOperand& s : spec.operands) {
      if (!s.staged()) continue;
      if (s.batch_broadcast && s.kind == Staging::shared) {
        once_tiles_.push_back(&s);
      } else if (s.batch_broadcast) {  // the batch's one tile, loaded where it lies (from L2 after the first)
        placed_.push_back(&s);
      } else if (s.kind == Staging::shared) {
        tiles_.push_back(&s);
      } else if (lane_runs(s) && run_bytes(s) <= 16) {
        direct_.push_back(&s);
      } else if (lane_runs(s) && read_in_place(s)) {
        runs_.push_back(&s);
      } else if (!lane_runs(s) && in_closed_form(s)) {
        placed_.push_back(&s);
      } else {
        staged_.push_back(&s);
      }
    }
    block_tiles_ = std::all_of(tiles_.begin(), tiles_.end(), [&](const FrameOperand* s) { return row_major(*s); });
    const long long limit = sm_limits(arch).shared_per_block;
    if (shared_bytes(1, 1) > limit) {
      throw ValueError(spec.title + ": shared memory: the kernel needs " + std::to_string(shared_bytes(1, 1)) +
                       " bytes per block for one scope instance; " + arch + " allows " + std::to_string(limit) +
                       ". Fix: smaller tiles (more batch_dims) or a scope with more threads");
    }
    const int wanted = instances_;
    while (instances_ > 1 && shared_bytes(instances_, 1) > kSharedPerBlockTarget) --instances_;
    if (instances_ < wanted) {
      why_ = std::to_string(instances_) + " instances: " + std::to_string(shared_bytes(instances_ + 1, 1)) +
             " bytes of shared memory for one more would pass " + std::to_string(kSharedPerBlockTarget);
    }
    // Small tiles: each instance takes several in turn, all staged by the whole block at once,
    // so that a block keeps enough bytes in flight and its launch is paid for. Registers loaded
    // straight from global memory bound the rounds too: every round's are loaded up front. A
    // run read in place keeps its own bytes in flight, and each round would be its fold again.
    const long long direct_bytes = direct_load_bytes();
    const int max_rounds = direct_bytes > 0 ? kMaxDirectRounds : kMaxRounds;
    auto fits = [&](int rounds) {
      return rounds <= max_rounds && rounds * direct_bytes <= (direct_bytes >= 16 ? direct_bytes : kDirectBytesTarget) &&
             shared_bytes(instances_, rounds) <= kStagedBytesTarget;
    };
    const bool staged = shared_bytes(instances_, 1) > 0;
    if (block_tiles_ && runs_.empty() && (staged || direct_bytes > 0)) {
      while (fits(2 * rounds_)) rounds_ *= 2;
    }
    if (rounds_ > 1) {
      why_ += "; each takes " + std::to_string(rounds_) + " tiles in turn, the block " +
              (staged ? "staging" : "loading") + " all " + std::to_string(instances_ * rounds_) + " at once";
      if (staged) why_ += " (" + std::to_string(shared_bytes(instances_, rounds_)) + " bytes)";
    }
    if (async_ && block_tiles_ && !tiles_.empty()) {
      stages_ = std::min(rounds_, kMaxStages);
      if (stages_ > 1) why_ += ", in " + std::to_string(stages_) + " pipelined parts";
    }
    // One run per lane, folded in order into one output: whole warps stream their lanes' runs
    // through a shared window (cp.async, sm_80 and later) instead of reading them in place,
    // where runs and tiles are whole 16-byte vectors (so that every run may be aligned).
    if (async_ && runs_.size() == 1 && one_output() && (threads_ == 1 || threads_ % 32 == 0) &&
        threads_ * instances_ % 32 == 0 &&
        run_bytes(*runs_.front()) % 16 == 0 && runs_.front()->elements * dtype_size(runs_.front()->dtype) % 16 == 0) {
      window_stages_ = kWindowStages;
      while (window_stages_ > 1 && launch_shared_bytes() > limit) --window_stages_;
      if (window_stages_ < 2) {
        window_stages_ = 0;
      } else {
        why_ += "; whole warps stream their runs through a " + std::to_string(window_stages_) + "-chunk window (" +
                std::to_string(window_bytes()) + " bytes)";
      }
    }
    chunk_map_slots();
    clamped_ = body_.syncs_instances && instances_ > 1 && scope_.kind != ScopeKind::warp;
  }

  // A map over many slots per thread takes them a chunk at a time (the largest divisor of the
  // slots up to kMapChunkSlots), where every register operand is staged with the same slots.
  void chunk_map_slots() {
    if (!body_.maps_slots || staged_.empty() || !direct_.empty() || !runs_.empty() || !tiles_.empty() ||
        !placed_.empty() || !once_tiles_.empty()) {
      return;
    }
    const int slots = staged_.front()->place->slots;
    if (slots <= kMapChunkSlots) return;
    for (const FrameOperand* s : staged_) {
      if (s->place->slots != slots) return;
    }
    chunk_slots_ = kMapChunkSlots;
    while (slots % chunk_slots_) --chunk_slots_;
    why_ += "; each thread maps its " + std::to_string(slots) + " slots " + std::to_string(chunk_slots_) + " at a time";
  }

  // What a block asks for at launch: its staging, then its warps' windows.
  long long launch_shared_bytes() const { return align16(shared_bytes(instances_, rounds_)) + window_bytes(); }
  long long window_bytes() const {
    return window_stages_ == 0 ? 0 : threads_ * instances_ / 32 * window_stages_ * tp::kWindowSlotBytes;
  }

  int instances() const { return instances_; }

  // In words, per staged operand: where the frame puts it and how it gets there.
  std::vector<std::pair<std::string, std::string>> staging() const {
    std::vector<std::pair<std::string, std::string>> out;
    auto in = [](const std::vector<const FrameOperand*>& list, const FrameOperand& s) {
      return std::find(list.begin(), list.end(), &s) != list.end();
    };
    for (const FrameOperand& s : spec_.operands) {
      if (s.moved_by_body) out.emplace_back(s.name, "registers: the body moves it a chunk at a time (the program's rows in passes)");
      if (!s.staged()) continue;
      std::string how;
      if (in(once_tiles_, s)) {
        how = "shared: the batch's one tile, staged once per instance";
      } else if (in(placed_, s)) {
        how = s.batch_broadcast ? "registers: read from the batch's one tile where it lies"
                                : "registers: loaded and stored where the tile lies (its placement in closed form, by vectors)";
      } else if (in(tiles_, s)) {
        how = block_tiles_ ? std::string("shared: the block's run of tiles, copied as it is") +
                                 (async_ && s.load ? " (cp.async)" : "")
                           : "shared: each instance's tile, moved element by element by its layout";
      } else if (in(direct_, s)) {
        how = "registers: each thread's run of at most 16 bytes, straight from global memory";
      } else if (in(runs_, s)) {
        how = window_stages_ > 0 ? "registers: each thread's run streamed through its warp's shared window"
                                 : "registers: each thread's run read in place as the body folds it";
      } else {
        how = "registers: through the block's skewed staging area (16-byte copies, then gathers by table)";
      }
      out.emplace_back(s.name, how);
    }
    return out;
  }
  int rounds() const { return rounds_; }
  const std::string& why() const { return why_; }
  long long shared_bytes(int instances, int rounds) const {
    const long long tiles = static_cast<long long>(instances) * rounds;
    long long bytes = 0;
    for (const FrameOperand* s : staged_) {
      bytes += align16(static_cast<long long>(skewed_span(static_cast<int>(tiles * s->elements))) * dtype_size(s->dtype));
    }
    for (const FrameOperand* s : tiles_) {
      if (block_tiles_) bytes += align16(tiles * s->elements * dtype_size(s->dtype));
    }
    return bytes + instances * (instance_tiles_bytes() + once_bytes() + align16(body_.shared_bytes));
  }

  std::string text(int min_blocks) {
    std::ostringstream decls, head, load, prefetch, run, store;
    declare_tables(decls);
    params(head);
    block_staging(load, store);
    staged_once(load);
    direct_prefetch(prefetch);
    instance_operands(run);
    body_call(run);
    instance_results(run);
    // the body's shared tiles are the instance's for every round: the next round's writes wait
    // for this one's reads
    if (body_.shared_bytes > 0 && rounds_ > 1 && threads_ > 1) run << "      " << cuda_scope_sync(scope_, instances_) << "\n";

    // Rounds index the prefetched registers, so their loops unroll wherever there are some.
    const char* unroll = direct_load_bytes() > 0 ? "#pragma unroll\n" : "";
    std::ostringstream os;
    os << "// " << spec_.title << "\n";
    if (uses(DType::float16)) os << "#define TP_WITH_FP16 1\n";
    if (uses(DType::bfloat16)) os << "#define TP_WITH_BF16 1\n";
    os << "#include <tileprim/tileprim.cuh>\n\n"
       << "namespace tp_gen {\n"
       << "constexpr int kThreads = " << threads_ << ";\n"
       << "constexpr int kInstances = " << instances_ << ";\n"
       << "constexpr int kRounds = " << rounds_ << ";\n"
       << "constexpr int kStages = " << stages_ << ";  // parts of the run, each synced once it is staged\n";
    if (body_.maps_slots) {
      os << "constexpr int kBodySlots = " << (chunk_slots_ > 0 ? chunk_slots_ : first_output().place->slots)
         << ";  // slots per body call\n";
    }
    os << decls.str() << body_.decls << "}  // namespace tp_gen\n\n"
       << "extern \"C\" __global__ void __launch_bounds__(" << threads_ * instances_
       << (min_blocks > 0 ? ", " + std::to_string(min_blocks) : "") << ")\n"
       << kKernelName << "(" << head.str() << ") {\n"
       << "  using namespace tp_gen;\n"
       << "  const int instance = threadIdx.x / kThreads;\n"
       << "  const int lane = threadIdx.x % kThreads;\n"
       << "  const long long first = static_cast<long long>(blockIdx.x) * (kInstances * kRounds);\n"
       << "  const int valid = static_cast<int>(tiles - first < kInstances * kRounds ? tiles - first : kInstances * kRounds);\n"
       << "  (void)lane; (void)valid;\n";
    if (launch_shared_bytes() > 0) os << "  extern __shared__ __align__(16) unsigned char tp_smem[];\n";
    if (body_.shared_bytes > 0) {
      os << "  unsigned char* const smem = tp_smem + " << body_offset() << " + static_cast<long long>(instance) * "
         << align16(body_.shared_bytes) << ";  // the body's own tiles\n";
    }
    os << load.str() << prefetch.str() << unroll << "  for (int stage = 0; stage < kStages; ++stage) {\n"
       << stage_sync_ << unroll
       << "    for (int round = stage * (kRounds / kStages); round < (stage + 1) * (kRounds / kStages); ++round) {\n"
       << "      const int slot = round * kInstances + instance;  // this instance's tile within the block's run\n"
       << (clamped_ ? "      const bool live = first + slot < tiles;  // past the end: the last tile again, nothing stored\n"
                      "      const long long tile = live ? first + slot : tiles - 1;\n"
                      "      {  // every instance passes the body's barriers\n"
                    : std::string("      const long long tile = first + slot;\n"
                                  "      if (tile < tiles) {  // a whole scope instance is in or out together\n") +
                          (body_.stores_itself ? "        constexpr bool live = true;\n" : ""))
       << indented(run.str(), "  ") << "      }\n"
       << "    }\n"
       << "  }\n"
       << store.str() << "}\n";
    return os.str();
  }

 private:
  bool uses(DType t) const { return std::find(spec_.dtypes.begin(), spec_.dtypes.end(), t) != spec_.dtypes.end(); }

  const FrameOperand& first_output() const {
    return *std::find_if(spec_.operands.begin(), spec_.operands.end(),
                         [](const FrameOperand& s) { return s.output && s.place; });
  }

  // Register operands gather and scatter through tables named after their placement (one table
  // per distinct placement: operands placed alike share it).
  const std::string& table(const FrameOperand& s, bool loads) {
    auto& names = loads ? load_tables_ : store_tables_;
    const std::pair<std::vector<int>, bool> key{loads ? s.place->load : s.place->store, per_slot(*s.place, loads)};
    auto it = names.find(key);
    if (it == names.end()) it = names.emplace(key, (loads ? "kLoad" : "kStore") + std::to_string(names.size())).first;
    return it->second;
  }

  void declare_tables(std::ostream& os) {
    std::map<std::string, std::vector<int>> tables;
    auto pick = [&](const RegisterPlacement& p, const std::vector<int>& full, bool loads) {
      if (!per_slot(p, loads)) return full;
      std::vector<int> slots(static_cast<size_t>(p.slots));
      for (int k = 0; k < p.slots; ++k) slots[k] = full[static_cast<size_t>(k) * p.threads];
      return slots;
    };
    for (const FrameOperand* s : staged_) {
      if (s->load) tables[table(*s, true)] = pick(*s->place, s->place->load, true);
      if (s->store) tables[table(*s, false)] = pick(*s->place, s->place->store, false);
    }
    for (const FrameOperand* s : direct_) {  // runs load whole; only replicas' stores need a table
      if (s->store && !stores_every_slot(*s)) tables[table(*s, false)] = pick(*s->place, s->place->store, false);
    }
    for (const FrameOperand* s : tiles_) {
      if (block_tiles_) break;  // staged by the block as they are
      os << "constexpr tp::MemLayout kMem_" << s->name << " = " << cuda_mem_layout(s->layout->memory_layout())
         << ";\n";
    }
    for (const FrameOperand* s : once_tiles_) {
      os << "constexpr tp::MemLayout kMem_" << s->name << " = " << cuda_mem_layout(s->layout->memory_layout())
         << ";\n";
    }
    for (const auto& [name, values] : tables) os << int_table(name, values, chunk_slots_ > 0);
    for (const FrameOperand* s : placed_) os << cuda_place_type("Place_" + s->name, *s->place);
  }

  void params(std::ostream& os) const {
    for (const FrameOperand& s : spec_.operands) {
      if (s.kind == Staging::scalar) {
        os << "double " << s.name << ", ";
      } else {
        os << (s.output ? "" : "const ") << dtype_cuda_name(s.dtype) << "* __restrict__ " << global(s) << ", ";
      }
    }
    os << "long long tiles";
  }

  std::string global(const FrameOperand& s) const { return "g_" + s.name; }

  // The block copies its contiguous run of tiles of every staged register operand (skewed)
  // and, when they are block-staged, of every shared tile (as it is) to shared memory. Shared
  // tiles go asynchronously where the arch allows, in kStages parts, each its own commit
  // group; the rounds of a part start once it has arrived.
  void block_staging(std::ostream& load, std::ostream& store) {
    const long long tiles = static_cast<long long>(instances_) * rounds_;
    long long offset = 0;
    bool loads = false, waits = false;
    std::ostringstream parts;
    auto stage = [&](const FrameOperand& s, const std::string& name, bool skew, long long bytes) {
      const char* T = dtype_cuda_name(s.dtype);
      load << "  " << T << "* " << name << " = reinterpret_cast<" << T << "*>(tp_smem + " << offset << ");\n";
      offset += align16(bytes);
      const std::string run = global(s) + " + first * " + std::to_string(s.elements);
      const std::string count = "valid * " + std::to_string(s.elements);
      const char* kSkew = skew ? "true" : "false";
      if (s.load && async_ && !skew) {
        const std::string E = std::to_string(s.elements);
        parts << "    tp::copy_to_shared_async(" << name << " + from * " << E << ", " << global(s) << " + (first + from) * "
              << E << ", count * " << E << ", threadIdx.x, blockDim.x);\n";
        waits = true;
      } else if (s.load) {
        load << "  tp::copy_to_shared<" << kSkew << ">(" << name << ", " << run << ", " << count
             << ", threadIdx.x, blockDim.x);\n";
        loads = true;
      }
      if (s.store) {
        store << "  __syncthreads();\n"
              << "  tp::copy_from_shared<" << kSkew << ">(" << run << ", " << name << ", " << count
              << ", threadIdx.x, blockDim.x);\n";
      }
    };
    for (const FrameOperand* s : staged_) {
      stage(*s, "stage_" + s->name, true,
            static_cast<long long>(skewed_span(static_cast<int>(tiles * s->elements))) * dtype_size(s->dtype));
    }
    if (block_tiles_) {
      for (const FrameOperand* s : tiles_) stage(*s, "tiles_" + s->name, false, tiles * s->elements * dtype_size(s->dtype));
    }
    if (waits) {
      load << "  for (int stage = 0; stage < kStages; ++stage) {  // tiles [from, from + count) of the run\n"
           << "    constexpr int kPart = kRounds / kStages * kInstances;\n"
           << "    const int from = stage * kPart;\n"
           << "    const int count = valid - from < 0 ? 0 : (valid - from < kPart ? valid - from : kPart);\n"
           << parts.str() << "    tp::commit_async();\n"
           << "  }\n";
      stage_sync_ = "    tp::wait_async(kStages - 1 - stage);\n    __syncthreads();\n";
    } else if (loads) {
      stage_sync_ = "    __syncthreads();\n";
    }
    tile_offset_ = offset;
  }

  // Shared tiles the whole batch shares: each instance stages its one tile before the rounds.
  void staged_once(std::ostream& os) const {
    long long offset = once_offset();
    for (const FrameOperand* s : once_tiles_) {
      const char* T = dtype_cuda_name(s->dtype);
      os << "  " << T << "* const " << s->name << " = reinterpret_cast<" << T << "*>(tp_smem + " << offset
         << " + static_cast<long long>(instance) * " << once_bytes() << ");  // the batch's one tile\n"
         << "  tp::load_shared_tile<kThreads>(" << s->name << ", kMem_" << s->name << ", " << global(*s) << ", "
         << s->elements << ", lane);\n";
      offset += tile_span(*s);
    }
    if (!once_tiles_.empty() && threads_ > 1) os << "  " << cuda_scope_sync(scope_, instances_) << "\n";
  }

  static long long tile_span(const FrameOperand& s) { return align16(s.layout->span() * dtype_size(s.dtype)); }
  static long long spans(const std::vector<const FrameOperand*>& tiles) {
    long long bytes = 0;
    for (const FrameOperand* s : tiles) bytes += tile_span(*s);
    return bytes;
  }
  // Each instance's own shared tiles (where the block does not stage them), and the batch's
  // one tiles.
  long long instance_tiles_bytes() const { return block_tiles_ ? 0 : spans(tiles_); }
  long long once_bytes() const { return spans(once_tiles_); }
  // Where the per-instance regions start: after the block's staging and its instances' tiles.
  long long once_offset() const { return tile_offset_ + instances_ * instance_tiles_bytes(); }
  long long body_offset() const { return once_offset() + instances_ * once_bytes(); }

  // Registers loaded straight from global memory: every round's, before the rounds run, so
  // that all of them are in flight at once.
  void direct_prefetch(std::ostream& os) const {
    for (const FrameOperand* s : direct_) {
      if (!s->load) continue;
      const std::string n = s->name;
      os << "  " << dtype_cuda_name(s->dtype) << " " << n << "_rounds[kRounds][" << s->place->slots << "];\n"
         << "#pragma unroll\n"
         << "  for (int round = 0; round < kRounds; ++round) {\n"
         << "    const long long tile = first + round * kInstances + instance;\n"
         << "    if (tile < tiles) tp::load_run(" << n << "_rounds[round], " << lane_run(*s) << ");\n"
         << "  }\n";
    }
  }

  // This instance's registers gathered from the staging area; its shared tiles found (block
  // staged) or filled.
  void instance_operands(std::ostream& os) {
    for (const FrameOperand* s : direct_) {
      const char* T = dtype_cuda_name(s->dtype);
      const std::string n = s->name;
      if (s->load) {
        os << "      " << T << " (&" << n << ")[" << s->place->slots << "] = " << n << "_rounds[round];\n";
      } else {
        os << "      " << T << " " << n << "[" << s->place->slots << "];\n";
      }
    }
    for (const FrameOperand* s : placed_) {
      os << "      " << dtype_cuda_name(s->dtype) << " " << s->name << "[" << s->place->slots << "];\n";
      if (s->load) {
        os << "      tp::load_tile<Place_" << s->name << ">(" << s->name << ", " << global(*s)
           << (s->batch_broadcast ? "" : " + tile * " + std::to_string(s->elements)) << ", lane);\n";
      }
    }
    if (chunk_slots_ > 0) {
      os << "#pragma unroll 1\n"
         << "      for (int chunk = 0; chunk < " << staged_.front()->place->slots / chunk_slots_ << "; ++chunk) {\n";
    }
    for (const FrameOperand* s : staged_) {
      const char* T = dtype_cuda_name(s->dtype);
      const RegisterPlacement& p = *s->place;
      os << "      " << T << " " << s->name << "[" << slots_per_call(p) << "];\n";
      if (!s->load) continue;
      os << "#pragma unroll\n"
         << "      for (int s = 0; s < " << slots_per_call(p) << "; ++s) {\n"
         << "        const int e = " << table(*s, true) << table_index(p, true) << ";\n"
         << "        " << s->name << "[s] = e >= 0 ? stage_" << s->name << "[tp::skewed(slot * "
         << s->elements << " + e)] : tp::limits<" << T << ">::quiet_nan();\n"
         << "      }\n";
    }
    long long offset = tile_offset_;
    const long long per_instance = instance_tiles_bytes();
    for (const FrameOperand* s : tiles_) {
      const char* T = dtype_cuda_name(s->dtype);
      const std::string n = s->name;
      if (block_tiles_) {
        os << "      " << T << "* " << n << " = tiles_" << n << " + static_cast<long long>(slot) * " << s->elements << ";\n";
        continue;
      }
      os << "      " << T << "* " << n << " = reinterpret_cast<" << T << "*>(tp_smem + " << offset
         << " + static_cast<long long>(instance) * " << per_instance << ");\n";
      offset += tile_span(*s);
      if (!s->load) continue;
      os << "      for (long long e = lane; e < " << s->elements << "; e += kThreads) " << n
         << "[tp::memory_offset(kMem_" << n << ", e)] = (" << global(*s) << " + tile * " << s->elements << ")[e];\n";
    }
    // tiles the instance filled itself must be whole before the body reads them, and read
    // before it stores them (block-staged ones are synced by the block)
    if (!tiles_.empty() && !block_tiles_ && threads_ > 1) os << "      " << cuda_scope_sync(scope_, instances_) << "\n";
  }

  // The body's call; with runs read in place, once for 16-byte aligned runs (read by vectors)
  // and once for the others, and first, where whole warps may stream their runs through their
  // windows, once for warps whose lanes all hold a tile with aligned runs.
  void body_call(std::ostream& os) const {
    if (runs_.empty()) {
      os << indented(body_.call, "      ");
      return;
    }
    std::string aligned;
    for (const FrameOperand* s : runs_) {
      os << "      const " << dtype_cuda_name(s->dtype) << "* " << s->name << "_at = " << lane_run(*s) << ";\n";
      aligned += (aligned.empty() ? "" : " && ") + std::string("tp::aligned16(") + s->name + "_at)";
    }
    auto views = [&](bool vectors) {
      for (const FrameOperand* s : runs_) {
        os << "        const tp::GlobalRun<" << dtype_cuda_name(s->dtype) << ", " << (vectors ? "true" : "false") << "> "
           << s->name << "{" << s->name << "_at};\n";
      }
      os << "        " << body_.call << "\n";
    };
    os << "      ";
    if (window_stages_ > 0) {
      const FrameOperand& s = *runs_.front();
      // lane 31's tile is in too (thread scope: a warp's lanes hold consecutive tiles)
      os << "if (tile + (31 - threadIdx.x % 32) / kThreads < tiles && __all_sync(~0u, " << aligned << ")) {\n"
         << "        const tp::WindowRun<" << dtype_cuda_name(s.dtype) << ", " << window_stages_ << "> " << s.name
         << "{reinterpret_cast<char*>(tp_smem) + " << align16(shared_bytes(instances_, rounds_)) << " + threadIdx.x / 32 * "
         << window_stages_ * tp::kWindowSlotBytes << ", " << s.name << "_at, " << s.place->slots
         << ", static_cast<int>(threadIdx.x % 32)};\n"
         << "        " << body_.call << "\n"
         << "      } else ";
    }
    os << "if (" << aligned << ") {\n";
    views(true);
    os << "      } else {\n";
    views(false);
    os << "      }\n";
  }

  void instance_results(std::ostream& os) {
    if (!tiles_.empty() && !block_tiles_ && threads_ > 1) os << "      " << cuda_scope_sync(scope_, instances_) << "\n";
    const std::string live = clamped_ ? "if (live) " : "";
    for (const FrameOperand* s : tiles_) {
      if (!s->store || block_tiles_) continue;
      const std::string n = s->name;
      os << "      " << live << "for (long long e = lane; e < " << s->elements << "; e += kThreads) (" << global(*s) << " + tile * "
         << s->elements << ")[e] = " << n << "[tp::memory_offset(kMem_" << n << ", e)];\n";
    }
    for (const FrameOperand* s : direct_) {
      if (!s->store) continue;
      if (stores_every_slot(*s)) {
        os << "      " << live << "tp::store_run(" << lane_run(*s) << ", " << s->name << ");\n";
      } else {  // replicas: the lanes the store table names write their slots
        const RegisterPlacement& p = *s->place;
        os << "#pragma unroll\n"
           << "      for (int s = 0; s < " << p.slots << "; ++s) {\n"
           << "        const int e = " << table(*s, false) << table_index(p, false) << ";\n"
           << "        if (" << (clamped_ ? "live && " : "") << "e >= 0) " << global(*s) << "[tile * " << s->elements
           << " + e] = " << s->name << "[s];\n"
           << "      }\n";
      }
    }
    for (const FrameOperand* s : placed_) {
      if (!s->store) continue;
      os << "      " << live << "tp::store_tile<Place_" << s->name << ">(" << global(*s) << " + tile * " << s->elements
         << ", " << s->name << ", lane);\n";
    }
    for (const FrameOperand* s : staged_) {
      if (!s->store) continue;
      const RegisterPlacement& p = *s->place;
      // with accum, threads holding a copy of an output read its old value from the staging
      // slot its owner now overwrites: all of them must have read first
      if (threads_ > 1) os << "      " << cuda_scope_sync(scope_, instances_) << "\n";
      os << "#pragma unroll\n"
         << "      for (int s = 0; s < " << slots_per_call(p) << "; ++s) {\n"
         << "        const int e = " << table(*s, false) << table_index(p, false) << ";\n"
         << "        if (e >= 0) stage_" << s->name << "[tp::skewed(slot * " << s->elements << " + e)] = "
         << s->name << "[s];\n"
         << "      }\n";
    }
    if (chunk_slots_ > 0) os << "      }\n";
  }

  // A staged operand's registers per body call, and its table's entry for register s of them.
  int slots_per_call(const RegisterPlacement& p) const { return chunk_slots_ > 0 ? chunk_slots_ : p.slots; }
  std::string table_index(const RegisterPlacement& p, bool loads) const {
    const std::string slot = chunk_slots_ > 0 ? "chunk * kBodySlots + s" : "s";
    if (per_slot(p, loads)) return "[" + slot + "]";
    return chunk_slots_ > 0 ? "[(" + slot + ") * kThreads + lane]" : "[s * kThreads + lane]";
  }

  // Whether every thread's slots are a run of the tile's elements in order: thread t holds
  // t * slots + k in slot k (a thread's replicas of an output may store nothing).
  static bool lane_runs(const FrameOperand& s) {
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

  static bool stores_every_slot(const FrameOperand& s) {
    return std::find(s.place->store.begin(), s.place->store.end(), -1) == s.place->store.end();
  }

  static long long run_bytes(const FrameOperand& s) {
    return static_cast<long long>(s.place->slots) * dtype_size(s.dtype);
  }

  // Register operands whose threads hold runs of them skip the staging round trip where that
  // costs no coalescing: a run of at most one 16-byte vector moves straight between global
  // memory and registers (a warp's accesses are one contiguous span). A longer run is read in
  // place, as the body folds it, when staging it would not fit a full block in shared memory
  // (hundreds of elements per thread: the lines a warp touches are read whole by its next few
  // loads, and no array of them has to live in local memory).
  bool read_in_place(const FrameOperand& s) const {
    const long long staging = align16(static_cast<long long>(skewed_span(static_cast<int>(
                                  std::min<long long>(instances_ * s.elements, 1 << 30)))) * dtype_size(s.dtype));
    return body_.indexes_sources && s.load && !s.store && staging > kSharedPerBlockTarget;
  }

  // The tile's output is one element: a body folds each lane's run once, in order.
  bool one_output() const {
    return std::count_if(spec_.operands.begin(), spec_.operands.end(), [](const FrameOperand& s) { return s.output; }) == 1 &&
           std::any_of(spec_.operands.begin(), spec_.operands.end(),
                       [](const FrameOperand& s) { return s.output && s.elements == 1; });
  }

  // Bytes a thread loads straight into registers per tile.
  long long direct_load_bytes() const {
    long long bytes = 0;
    for (const FrameOperand* s : direct_) {
      if (s->load) bytes += static_cast<long long>(s->place->slots) * dtype_size(s->dtype);
    }
    return bytes;
  }

  std::string lane_run(const FrameOperand& s) const {
    return global(s) + " + tile * " + std::to_string(s.elements) +
           (s.place->threads > 1 ? " + lane * " + std::to_string(s.place->slots) : "");
  }

  static bool row_major(const FrameOperand& s) { return *s.layout == TileLayout::row_major(s.shape); }

  const FrameSpec& spec_;
  const KernelBody& body_;
  const ExecScope& scope_;
  int threads_;
  int instances_ = 1;
  int rounds_ = 1;
  int stages_ = 1;
  bool async_;  // cp.async (sm_80 and later) stages row-major shared tiles
  std::string stage_sync_;  // what a part of the run waits for before its rounds
  bool block_tiles_ = false;  // every shared tile row-major: the block stages them as they are
  bool clamped_ = false;      // instances past the batch's end run the body too (KernelBody::syncs_instances)
  std::string why_;
  long long tile_offset_ = 0;
  int window_stages_ = 0;  // chunks of each warp's run window; 0: runs read in place by GlobalRun
  int chunk_slots_ = 0;    // a map's slots per body call where a thread's are taken in chunks; 0: all
  std::vector<const FrameOperand*> staged_, direct_, runs_, tiles_, placed_, once_tiles_;
  std::map<std::pair<std::vector<int>, bool>, std::string> load_tables_, store_tables_;
};

}  // namespace

// Instances per block before shared memory limits them, and why. Thread and warp instances
// need no barrier of their own; warpgroup and CTA instances each sync on a named barrier
// (1 + instance), so a CTA instance must be whole warps and a block holds at most 15.
std::pair<int, std::string> scope_instances(const ExecScope& scope) {
  const int threads = scope.threads;
  switch (scope.kind) {
    case ScopeKind::thread: return {128, "128 threads of one tile each"};
    case ScopeKind::warp: return {kBlockThreadsTarget / 32, std::to_string(kBlockThreadsTarget / 32) + " warps of one tile each"};
    default: break;
  }
  if (threads % 32 != 0) return {1, "a CTA of " + std::to_string(threads) + " threads is not whole warps: one per block"};
  const int n = std::max(1, std::min(kNamedBarriers, kBlockThreadsTarget / threads));
  if (n == 1) return {1, "one " + std::to_string(threads) + "-thread instance fills a block"};
  return {n, std::to_string(n) + " instances of " + std::to_string(threads) +
                 " threads, each synced by its own named barrier"};
}

namespace {
KernelSource launch_of(const Frame& frame, const FrameSpec& spec) {
  KernelSource k;
  k.threads = spec.scope.threads;
  k.instances = frame.instances();
  k.rounds = frame.rounds();
  k.shared_bytes = frame.launch_shared_bytes();
  k.why = frame.why();
  k.staging = frame.staging();
  return k;
}
}  // namespace

KernelSource frame_launch(const FrameSpec& spec, const std::string& arch) { return launch_of(Frame(spec, arch), spec); }

KernelSource render_kernel(const FrameSpec& spec, const std::string& arch, int min_blocks) {
  Frame frame(spec, arch);
  KernelSource k = launch_of(frame, spec);
  k.min_blocks = min_blocks;
  k.text = frame.text(min_blocks);
  return k;
}

std::string cuda_mem_layout(const MemLayout& L) {
  std::ostringstream os;
  os << "tp::MemLayout{" << L.n << ", {";
  for (int k = 0; k < L.n; ++k) os << (k ? ", " : "") << L.extent[k];
  os << "}, {";
  for (int k = 0; k < L.n; ++k) os << (k ? ", " : "") << L.stride[k];
  os << "}, " << L.offset << ", {" << L.swizzle.per_element << ", " << L.swizzle.swizzle_len << ", "
     << L.swizzle.atom_len << "}}";
  return os.str();
}

std::string cuda_scope_sync(const ExecScope& scope, int instances) {
  switch (scope.kind) {
    case ScopeKind::thread: return "";
    case ScopeKind::warp: return "__syncwarp();";
    case ScopeKind::cta:
      if (instances == 1) return "__syncthreads();";
      [[fallthrough]];
    case ScopeKind::warpgroup:  // barrier 1 + instance over this instance's threads
      return "tp::instance_sync<kThreads, kInstances>(instance);";
  }
  return "";
}

std::string cuda_place_type(const std::string& name, const RegisterPlacement& p) {
  const auto [owners, vec] = run_form(p);
  if (owners > 0) return "using " + name + " = tp::RunPlace<" + std::to_string(owners) + ", " + std::to_string(vec) + ">;\n";
  return int_table(name + "_load", p.load, true) + int_table(name + "_store", p.store, true) + "using " + name +
         " = tp::TablePlace<kThreads, " + name + "_load, " + name + "_store>;\n";
}

}  // namespace tp
