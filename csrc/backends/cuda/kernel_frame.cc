#include "backends/cuda/kernel_frame.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

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

long long align16(long long bytes) { return (bytes + 15) / 16 * 16; }

// Instances per block before shared memory limits them, and why. Thread and warp instances
// need no barrier of their own; warpgroup and CTA instances each sync on a named barrier
// (1 + instance), so a CTA instance must be whole warps and a block holds at most 15.
std::pair<int, std::string> default_instances(const ExecScope& scope) {
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

std::string name_of(const OperandStaging& s) { return s.operand < 0 ? "out" : "in" + std::to_string(s.operand); }

std::string int_table(const std::string& name, const std::vector<int>& values) {
  std::ostringstream os;
  os << "constexpr int " << name << "[" << std::max<size_t>(values.size(), 1) << "] = {";
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
  Frame(const Plan& plan, const std::string& arch) : plan_(plan), threads_(plan.call.scope.threads) {
    for (const OperandStaging& s : plan.staging) {
      if (s.kind == Staging::registers) (direct(s) ? direct_ : staged_).push_back(&s);
      if (s.kind == Staging::shared) tiles_.push_back(&s);
    }
    block_tiles_ = std::all_of(tiles_.begin(), tiles_.end(), [&](const OperandStaging* s) { return row_major(*s); });
    const long long limit = max_shared_per_block(arch);
    if (shared_bytes(1, 1) > limit) {
      throw ValueError("shared memory: this kernel needs " + std::to_string(shared_bytes(1, 1)) +
                       " bytes per block for one scope instance; " + arch + " allows " + std::to_string(limit) +
                       " (use smaller tiles or batch_dims)");
    }
    std::tie(instances_, why_) = default_instances(plan.call.scope);
    const int wanted = instances_;
    while (instances_ > 1 && shared_bytes(instances_, 1) > kSharedPerBlockTarget) --instances_;
    if (instances_ < wanted) {
      why_ = std::to_string(instances_) + " instances: " + std::to_string(shared_bytes(instances_ + 1, 1)) +
             " bytes of shared memory for one more would pass " + std::to_string(kSharedPerBlockTarget);
    }
    // Small tiles: each instance takes several in turn, all staged by the whole block at once,
    // so that a block keeps enough bytes in flight and its launch is paid for.
    while (block_tiles_ && shared_bytes(instances_, 1) > 0 && rounds_ < kMaxRounds &&
           shared_bytes(instances_, 2 * rounds_) <= kStagedBytesTarget) {
      rounds_ *= 2;
    }
    if (rounds_ > 1) {
      why_ += "; each takes " + std::to_string(rounds_) + " tiles in turn, the block staging all " +
              std::to_string(instances_ * rounds_) + " at once (" + std::to_string(shared_bytes(instances_, rounds_)) +
              " bytes)";
    }
  }

  int instances() const { return instances_; }
  int rounds() const { return rounds_; }
  const std::string& why() const { return why_; }
  long long shared_bytes(int instances, int rounds) const {
    const long long tiles = static_cast<long long>(instances) * rounds;
    long long bytes = 0;
    for (const OperandStaging* s : staged_) {
      bytes += align16(static_cast<long long>(skewed_span(static_cast<int>(tiles * s->elements))) * dtype_size(s->dtype));
    }
    for (const OperandStaging* s : tiles_) {
      bytes += block_tiles_ ? align16(tiles * s->elements * dtype_size(s->dtype))
                            : instances * align16(s->layout->span() * dtype_size(s->dtype));
    }
    return bytes;
  }

  std::string text(const KernelBody& body) {
    std::ostringstream decls, head, load, run, store;
    declare_tables(decls);
    params(head);
    block_staging(load, store);
    instance_operands(run);
    run << "      " << body.call << "\n";
    instance_results(run);

    std::ostringstream os;
    os << "// tileprim kernel: " << plan_.call.str() << " [" << plan_.variant << "]\n";
    if (uses(DType::float16)) os << "#define TP_WITH_FP16 1\n";
    if (uses(DType::bfloat16)) os << "#define TP_WITH_BF16 1\n";
    os << "#include <tileprim/tileprim.cuh>\n\n"
       << "namespace tp_gen {\n"
       << "constexpr int kThreads = " << threads_ << ";\n"
       << "constexpr int kInstances = " << instances_ << ";\n"
       << "constexpr int kRounds = " << rounds_ << ";\n"
       << decls.str() << body.decls << "}  // namespace tp_gen\n\n"
       << "extern \"C\" __global__ void __launch_bounds__(" << threads_ * instances_ << ")\n"
       << "tp_kernel(" << head.str() << ") {\n"
       << "  using namespace tp_gen;\n"
       << "  const int instance = threadIdx.x / kThreads;\n"
       << "  const int lane = threadIdx.x % kThreads;\n"
       << "  const long long first = static_cast<long long>(blockIdx.x) * (kInstances * kRounds);\n"
       << "  const int valid = static_cast<int>(tiles - first < kInstances * kRounds ? tiles - first : kInstances * kRounds);\n"
       << "  (void)lane; (void)valid;\n";
    if (shared_bytes(instances_, rounds_) > 0) os << "  extern __shared__ __align__(16) unsigned char tp_smem[];\n";
    os << load.str() << "  for (int round = 0; round < kRounds; ++round) {\n"
       << "    const int slot = round * kInstances + instance;  // this instance's tile within the block's run\n"
       << "    const long long tile = first + slot;\n"
       << "    if (tile < tiles) {  // a whole scope instance is in or out together\n"
       << run.str() << "    }\n"
       << "  }\n"
       << store.str() << "}\n";
    return os.str();
  }

 private:
  bool uses(DType t) const {
    if (plan_.call.output.dtype == t) return true;
    return std::any_of(plan_.call.inputs.begin(), plan_.call.inputs.end(),
                       [&](const TileRef& r) { return !r.scalar && r.dtype == t; });
  }

  // Register operands gather and scatter through tables named after their placement.
  const std::string& table(const OperandStaging& s, bool loads) {
    auto& names = loads ? load_tables_ : store_tables_;
    auto it = names.find(s.place.get());
    if (it == names.end()) {
      it = names.emplace(s.place.get(), (loads ? "kLoad" : "kStore") + std::to_string(names.size())).first;
    }
    return it->second;
  }

  void declare_tables(std::ostream& os) {
    std::map<std::string, std::vector<int>> tables;
    for (const OperandStaging* s : staged_) {
      const RegisterPlacement& p = *s->place;
      auto pick = [&](const std::vector<int>& full, bool loads) {
        if (!per_slot(p, loads)) return full;
        std::vector<int> slots(static_cast<size_t>(p.slots));
        for (int k = 0; k < p.slots; ++k) slots[k] = full[static_cast<size_t>(k) * p.threads];
        return slots;
      };
      if (s->load) tables[table(*s, true)] = pick(p.load, true);
      if (s->store) tables[table(*s, false)] = pick(p.store, false);
    }
    for (const OperandStaging* s : tiles_) {
      if (block_tiles_) break;  // staged by the block as they are
      os << "constexpr tp::MemLayout kMem_" << name_of(*s) << " = " << cuda_mem_layout(s->layout->memory_layout())
         << ";\n";
    }
    for (const auto& [name, values] : tables) os << int_table(name, values);
  }

  void params(std::ostream& os) const {
    for (size_t i = 0; i < plan_.call.inputs.size(); ++i) {
      const TileRef& r = plan_.call.inputs[i];
      if (r.scalar) {
        os << "double s" << i << ", ";
      } else {
        os << "const " << dtype_cuda_name(r.dtype) << "* __restrict__ g_in" << i << ", ";
      }
    }
    os << dtype_cuda_name(plan_.call.output.dtype) << "* __restrict__ g_out, long long tiles";
  }

  std::string global(const OperandStaging& s) const { return "g_" + name_of(s); }

  // The block copies its contiguous run of tiles of every register operand (skewed) and,
  // when they are block-staged, of every shared tile (as it is) to shared memory.
  void block_staging(std::ostream& load, std::ostream& store) {
    const long long tiles = static_cast<long long>(instances_) * rounds_;
    long long offset = 0;
    bool loads = false;
    auto stage = [&](const OperandStaging& s, const std::string& name, const char* skew, long long bytes) {
      const char* T = dtype_cuda_name(s.dtype);
      load << "  " << T << "* " << name << " = reinterpret_cast<" << T << "*>(tp_smem + " << offset << ");\n";
      offset += align16(bytes);
      const std::string run = global(s) + " + first * " + std::to_string(s.elements);
      const std::string count = "valid * " + std::to_string(s.elements);
      if (s.load) {
        load << "  tp::copy_to_shared<" << skew << ">(" << name << ", " << run << ", " << count
             << ", threadIdx.x, blockDim.x);\n";
        loads = true;
      }
      if (s.store) {
        store << "  __syncthreads();\n"
              << "  tp::copy_from_shared<" << skew << ">(" << run << ", " << name << ", " << count
              << ", threadIdx.x, blockDim.x);\n";
      }
    };
    for (const OperandStaging* s : staged_) {
      stage(*s, "stage_" + name_of(*s), "true",
            static_cast<long long>(skewed_span(static_cast<int>(tiles * s->elements))) * dtype_size(s->dtype));
    }
    if (block_tiles_) {
      for (const OperandStaging* s : tiles_) stage(*s, "tiles_" + name_of(*s), "false", tiles * s->elements * dtype_size(s->dtype));
    }
    if (loads) load << "  __syncthreads();\n";
    tile_offset_ = offset;
  }

  // This instance's registers gathered from the staging area; its shared tiles found (block
  // staged) or filled.
  void instance_operands(std::ostream& os) {
    for (const OperandStaging* s : direct_) {
      const char* T = dtype_cuda_name(s->dtype);
      os << "      " << T << " " << name_of(*s) << "[" << s->elements << "];\n";
      if (s->load) os << "      tp::load_vector(" << name_of(*s) << ", " << global(*s) << " + tile * " << s->elements << ");\n";
    }
    for (const OperandStaging* s : staged_) {
      const char* T = dtype_cuda_name(s->dtype);
      const RegisterPlacement& p = *s->place;
      os << "      " << T << " " << name_of(*s) << "[" << p.slots << "];\n";
      if (!s->load) continue;
      os << "#pragma unroll\n"
         << "      for (int s = 0; s < " << p.slots << "; ++s) {\n"
         << "        const int e = " << table(*s, true) << (per_slot(p, true) ? "[s]" : "[s * kThreads + lane]") << ";\n"
         << "        " << name_of(*s) << "[s] = e >= 0 ? stage_" << name_of(*s) << "[tp::skewed(slot * "
         << s->elements << " + e)] : tp::limits<" << T << ">::quiet_nan();\n"
         << "      }\n";
    }
    long long offset = tile_offset_;
    long long per_instance = 0;
    for (const OperandStaging* s : tiles_) per_instance += align16(s->layout->span() * dtype_size(s->dtype));
    for (const OperandStaging* s : tiles_) {
      const char* T = dtype_cuda_name(s->dtype);
      const std::string n = name_of(*s);
      if (block_tiles_) {
        os << "      " << T << "* " << n << " = tiles_" << n << " + static_cast<long long>(slot) * " << s->elements << ";\n";
        continue;
      }
      os << "      " << T << "* " << n << " = reinterpret_cast<" << T << "*>(tp_smem + " << offset
         << " + static_cast<long long>(instance) * " << per_instance << ");\n";
      offset += align16(s->layout->span() * dtype_size(s->dtype));
      if (!s->load) continue;
      os << "      for (long long e = lane; e < " << s->elements << "; e += kThreads) " << n
         << "[tp::memory_offset(kMem_" << n << ", e)] = (" << global(*s) << " + tile * " << s->elements << ")[e];\n";
    }
    // tiles the instance filled itself must be whole before the body reads them, and read
    // before it stores them (block-staged ones are synced by the block)
    if (!tiles_.empty() && !block_tiles_ && threads_ > 1) os << "      " << cuda_scope_sync(plan_.call.scope, instances_) << "\n";
  }

  void instance_results(std::ostream& os) {
    if (!tiles_.empty() && !block_tiles_ && threads_ > 1) os << "      " << cuda_scope_sync(plan_.call.scope, instances_) << "\n";
    for (const OperandStaging* s : tiles_) {
      if (!s->store || block_tiles_) continue;
      const std::string n = name_of(*s);
      os << "      for (long long e = lane; e < " << s->elements << "; e += kThreads) (" << global(*s) << " + tile * "
         << s->elements << ")[e] = " << n << "[tp::memory_offset(kMem_" << n << ", e)];\n";
    }
    for (const OperandStaging* s : direct_) {
      if (s->store) os << "      tp::store_vector(" << global(*s) << " + tile * " << s->elements << ", " << name_of(*s) << ");\n";
    }
    for (const OperandStaging* s : staged_) {
      if (!s->store) continue;
      const RegisterPlacement& p = *s->place;
      // with accum, threads holding a copy of an output read its old value from the staging
      // slot its owner now overwrites: all of them must have read first
      if (threads_ > 1) os << "      " << cuda_scope_sync(plan_.call.scope, instances_) << "\n";
      os << "#pragma unroll\n"
         << "      for (int s = 0; s < " << p.slots << "; ++s) {\n"
         << "        const int e = " << table(*s, false) << (per_slot(p, false) ? "[s]" : "[s * kThreads + lane]")
         << ";\n"
         << "        if (e >= 0) stage_" << name_of(*s) << "[tp::skewed(slot * " << s->elements << " + e)] = "
         << name_of(*s) << "[s];\n"
         << "      }\n";
    }
  }

  // A thread-scope tile of at most 16 bytes whose slots are its elements in order: its thread
  // loads (and stores) it directly, with one vector access at 16 bytes; a warp's accesses are
  // one contiguous run, so it skips the staging round trip through shared memory.
  bool direct(const OperandStaging& s) const {
    const RegisterPlacement& p = *s.place;
    if (threads_ != 1 || p.slots != s.elements || s.elements * dtype_size(s.dtype) > 16) return false;
    for (int k = 0; k < p.slots; ++k) {
      if ((s.load && p.load[k] != k) || (s.store && p.store[k] != k)) return false;
    }
    return true;
  }

  bool row_major(const OperandStaging& s) const {
    const TileRef& ref = s.operand < 0 ? plan_.call.output : plan_.call.inputs[s.operand];
    return *s.layout == TileLayout::row_major(ref.shape);
  }

  const Plan& plan_;
  int threads_;
  int instances_ = 1;
  int rounds_ = 1;
  bool block_tiles_ = false;  // every shared tile row-major: the block stages them as they are
  std::string why_;
  long long tile_offset_ = 0;
  std::vector<const OperandStaging*> staged_, direct_, tiles_;
  std::map<const RegisterPlacement*, std::string> load_tables_, store_tables_;
};

}  // namespace

KernelSource render_kernel(const Plan& plan, const KernelBody& body, const std::string& arch) {
  Frame frame(plan, arch);
  KernelSource k;
  k.text = frame.text(body);
  k.threads = plan.call.scope.threads;
  k.instances = frame.instances();
  k.rounds = frame.rounds();
  k.shared_bytes = frame.shared_bytes(k.instances, k.rounds);
  k.why = frame.why();
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
      return "asm volatile(\"bar.sync %0, %1;\" :: \"r\"(1 + instance), \"n\"(kThreads) : \"memory\");";
  }
  return "";
}

long long max_shared_per_block(const std::string& arch) {
  const size_t digits = arch.find_first_of("0123456789");
  const int sm = digits == std::string::npos ? 0 : std::stoi(arch.substr(digits));
  if (sm >= 120) return 99 * 1024;
  if (sm >= 90) return 227 * 1024;
  if (sm == 80 || sm == 87) return 163 * 1024;
  if (sm >= 86) return 99 * 1024;
  return 64 * 1024;
}

}  // namespace tp
