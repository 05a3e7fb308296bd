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

class Frame {
 public:
  Frame(const FrameSpec& spec, const LaunchShape& shape)
      : spec_(spec), shape_(shape), body_(spec.body), scope_(spec.scope), threads_(spec.scope.threads),
        instances_(shape.instances), rounds_(shape.rounds), stages_(shape.stages), async_(shape.async),
        block_tiles_(shape.block_tiles), clamped_(shape.clamped), window_stages_(shape.window_stages),
        chunk_slots_(shape.chunk_slots) {
    for (size_t i = 0; i < spec.operands.size(); ++i) {
      const FrameOperand* s = &spec.operands[i];
      switch (shape.operands[i].path) {
        case OperandPath::once_tile: once_tiles_.push_back(s); break;
        case OperandPath::placed: placed_.push_back(s); break;
        case OperandPath::block_tile:
        case OperandPath::instance_tile: tiles_.push_back(s); break;
        case OperandPath::direct: direct_.push_back(s); break;
        case OperandPath::run: runs_.push_back(s); break;
        case OperandPath::skewed: staged_.push_back(s); break;
        default: break;
      }
    }
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
    if (shape_.shared_bytes > 0) os << "  extern __shared__ __align__(16) unsigned char tp_smem[];\n";
    if (body_.shared_bytes > 0) {
      os << "  unsigned char* const smem = tp_smem + " << shape_.body_at << " + static_cast<long long>(instance) * "
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
  long long once_offset() const { return shape_.once_at; }
  long long once_bytes() const { return shape_.once_bytes; }
  long long instance_tiles_bytes() const { return shape_.instance_tiles_bytes; }

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
         << "{reinterpret_cast<char*>(tp_smem) + " << shape_.windows_at << " + threadIdx.x / 32 * "
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

  static bool stores_every_slot(const FrameOperand& s) {
    return std::find(s.place->store.begin(), s.place->store.end(), -1) == s.place->store.end();
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

  const FrameSpec& spec_;
  const LaunchShape& shape_;
  const KernelBody& body_;
  const ExecScope& scope_;
  int threads_;
  int instances_, rounds_, stages_;
  bool async_, block_tiles_, clamped_;
  int window_stages_, chunk_slots_;
  std::string stage_sync_;  // what a part of the run waits for before its rounds
  long long tile_offset_ = 0;
  std::vector<const FrameOperand*> staged_, direct_, runs_, tiles_, placed_, once_tiles_;
  std::map<std::pair<std::vector<int>, bool>, std::string> load_tables_, store_tables_;
};

}  // namespace

KernelSource frame_launch(const FrameSpec& spec, const std::string& arch) {
  KernelSource k;
  static_cast<LaunchShape&>(k) = launch_shape(spec, arch);
  return k;
}

KernelSource render_kernel(const FrameSpec& spec, const std::string& arch, int min_blocks) {
  KernelSource k = frame_launch(spec, arch);
  k.min_blocks = min_blocks;
  k.text = Frame(spec, k).text(min_blocks);
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
