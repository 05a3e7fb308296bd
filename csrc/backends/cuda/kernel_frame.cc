#include "backends/cuda/kernel_frame.h"

#include <algorithm>
#include <sstream>

namespace tp {

namespace {

// Every line of `text` after `pad` (the instance's statements sit inside the rounds' call).
std::string indented(const std::string& text, const std::string& pad) {
  std::istringstream lines(text);
  std::ostringstream os;
  for (std::string line; std::getline(lines, line);) os << (line.empty() || line[0] == '#' ? "" : pad) << line << "\n";
  return os.str();
}

// A folded output's sums' C type (folded_sum_dtype)
const char* fold_type(const FrameOperand& s) { return dtype_cuda_name(folded_sum_dtype(s)); }

bool stores_every_slot(const FrameOperand& s) {
  return std::find(s.place->store.begin(), s.place->store.end(), -1) == s.place->store.end();
}

// The kernel's text: declarations of the launch shape, each operand's staging and the body's
// descriptors, then the frame's device templates (tileprim/frame.cuh) called around the body.
class Renderer {
 public:
  Renderer(const FrameSpec& spec, const LaunchShape& shape) : spec_(spec), shape_(shape), body_(spec.body) {}

  std::string text(int min_blocks) {
    std::ostringstream decls, kernel, rounds;
    for (size_t i = 0; i < spec_.operands.size(); ++i) declare(decls, spec_.operands[i], shape_.operands[i]);
    block_staging(kernel);
    round(rounds);

    std::ostringstream os;
    os << "// " << spec_.title << "\n";
    if (uses(DType::float16)) os << "#define TP_WITH_FP16 1\n";
    if (uses(DType::bfloat16)) os << "#define TP_WITH_BF16 1\n";
    os << "#include <tileprim/tileprim.cuh>\n\n"
       << "namespace tp_gen {\n"
       << "constexpr int kThreads = " << shape_.threads << ";\n"
       << "constexpr int kInstances = " << shape_.instances << ";\n"
       << "constexpr int kRounds = " << shape_.rounds << ";\n"
       << "constexpr int kStages = " << shape_.stages << ";  // parts of the run, each synced once it is staged\n";
    if (cluster()) {
      os << "constexpr int kCtas = " << shape_.ctas << ";  // CTAs of a cluster, which is one scope instance\n"
         << "constexpr int kCtaThreads = " << shape_.threads / shape_.ctas << ";\n";
    }
    os << "using Block = tp::BlockRun<kThreads, kInstances, kRounds, kStages" << (cluster() ? ", kCtas" : "") << ">;\n";
    if (body_.maps_slots) {
      os << "constexpr int kBodySlots = " << (shape_.chunk_slots > 0 ? shape_.chunk_slots : first_output().place->slots)
         << ";  // slots per body call\n";
    }
    os << decls.str() << body_.decls << "}  // namespace tp_gen\n\n"
       << "extern \"C\" __global__ void __launch_bounds__(" << shape_.block_threads()
       << (min_blocks > 0 ? ", " + std::to_string(min_blocks) : "") << ")"
       << (cluster() ? " __cluster_dims__(" + std::to_string(shape_.ctas) + ", 1, 1)" : "") << "\n"
       << kKernelName << "(" << params() << ") {\n"
       << "  using namespace tp_gen;\n";
    if (shape_.shared_bytes > 0) os << "  extern __shared__ __align__(16) unsigned char tp_smem[];\n";
    std::ostringstream run;  // the block's run of tiles
    run << "  const int instance = block.instance, lane = block.lane;\n"
        << "  (void)instance; (void)lane;\n";
    if (cluster()) run << "  int cluster_phase = 0;  // the cluster's exchanges so far (tp::ClusterLanes)\n";
    if (body_.shared_bytes > 0) {
      run << "  unsigned char* const smem = tp_smem + " << shape_.body_at << " + static_cast<long long>(instance) * "
          << shape_.body_bytes << ";  // the body's own tiles\n";
    }
    // Rounds index the registers loaded up front, so their loops unroll wherever there are some.
    run << kernel.str() << "  block.rounds<" << arrival() << ", " << (direct_loads() ? "true" : "false") << ", "
        << (shape_.clamped ? "true" : "false")
        << ">([&](const int round, const int slot, const long long tile, const bool live) {\n"
        << rounds.str() << "  });\n";
    for (size_t i = 0; i < spec_.operands.size(); ++i) {  // the block's run of tiles written back
      const FrameOperand& s = spec_.operands[i];
      const OperandPath path = shape_.operands[i].path;
      if (s.store && (path == OperandPath::skewed || path == OperandPath::block_tile)) {
        run << "  " << area(s, path) << ".copy_out(block, " << global(s) << ");\n";
      }
    }
    if (shape_.folded_tiles > 0) {
      folded_runs(os, run.str());
    } else {
      os << "  const Block block(tiles);\n" << run.str();
    }
    if (cluster()) os << "  tp::cluster_sync();  // no CTA exits while a peer may still read its shared memory\n";
    os << "}\n";
    return os.str();
  }

 private:
  bool cluster() const { return shape_.ctas > 1; }

  // A block taking folded_tiles consecutive tiles one at a time (one instance, one round each: a
  // run of one tile), its folded outputs' sums in shared memory from the first to the last, then
  // written as the block's one tile of each.
  void folded_runs(std::ostream& os, const std::string& run) const {
    long long at = shape_.folds_at;
    std::ostringstream written;
    for (const FrameOperand& s : spec_.operands) {
      if (!s.folded) continue;
      const char* W = fold_type(s);
      os << "  " << W << "* const " << fold_sum(s) << " = reinterpret_cast<" << W << "*>(tp_smem + " << at << ");\n"
         << "  tp::begin_fold(" << fold_sum(s) << ", " << s.elements << ");\n";
      written << "  tp::end_fold(" << global(s) << " + static_cast<long long>(blockIdx.x) * " << s.elements << ", "
              << fold_sum(s) << ", " << s.elements << ");\n";
      at += folded_sum_bytes(s);
    }
    os << "  constexpr long long kFolded = " << shape_.folded_tiles << ";  // the block's tiles, one at a time\n"
       << "  for (long long taken = 0; taken < kFolded; ++taken) {\n"
       << "  const Block block(tiles, static_cast<long long>(blockIdx.x) * kFolded + taken);\n"
       << "  if (block.valid <= 0) break;  // the batch's end: the same for every thread\n"
       << run << "  __syncthreads();  // this tile's shared memory read before the next one's is written\n"
       << "  }\n"
       << written.str();
  }
  static std::string fold_sum(const FrameOperand& s) { return "sum_" + s.name; }
  bool uses(DType t) const { return std::find(spec_.dtypes.begin(), spec_.dtypes.end(), t) != spec_.dtypes.end(); }

  const FrameOperand& first_output() const {
    return *std::find_if(spec_.operands.begin(), spec_.operands.end(),
                         [](const FrameOperand& s) { return s.output && s.place; });
  }

  template <class F> void each(OperandPath path, F f) const {
    for (size_t i = 0; i < spec_.operands.size(); ++i) {
      if (shape_.operands[i].path == path) f(spec_.operands[i], shape_.operands[i]);
    }
  }

  bool direct_loads() const {
    bool any = false;
    each(OperandPath::direct, [&](const FrameOperand& s, const OperandLaunch&) { any |= s.load; });
    return any;
  }

  std::string params() const {
    std::ostringstream os;
    for (const FrameOperand& s : spec_.operands) {
      if (s.kind == Staging::scalar) {
        os << "double " << s.name << ", ";
      } else {
        os << (s.output ? "" : "const ") << (s.folded ? fold_type(s) : dtype_cuda_name(s.dtype)) << "* __restrict__ "
           << global(s) << ", ";
      }
    }
    os << "long long tiles";
    return os.str();
  }

  static std::string global(const FrameOperand& s) { return "g_" + s.name; }
  static std::string area(const FrameOperand& s, OperandPath path) {
    return (path == OperandPath::skewed ? "stage_" : "tiles_") + s.name;
  }
  std::string tile_at(const FrameOperand& s) const { return global(s) + " + tile * " + std::to_string(s.elements); }
  std::string sync() const { return cuda_scope_sync(spec_.scope, shape_.instances); }

  // The operand's descriptors: its placement's type (Place_<name>) where its registers move by
  // placement, its layout (kMem_<name>) where an instance moves its shared tile element by
  // element. Operands staged through the skewed area keep their tables where a closed form
  // exists too: ptxas keeps a warpgroup's rows of 1024 in 48 registers with them, 64 with the
  // arithmetic.
  void declare(std::ostream& os, const FrameOperand& s, const OperandLaunch& o) {
    switch (o.path) {
      case OperandPath::direct:  // runs move whole; replicas store by placement
        if (s.store && !stores_every_slot(s)) os << table_place_type("Place_" + s.name, *s.place, tables_, false, true);
        break;
      case OperandPath::skewed: os << table_place_type("Place_" + s.name, *s.place, tables_, s.load, s.store); break;
      case OperandPath::placed:
      case OperandPath::prefetched: os << cuda_place_type("Place_" + s.name, *s.place); break;
      case OperandPath::instance_tile:
      case OperandPath::once_tile:
        os << "constexpr tp::MemLayout kMem_" << s.name << " = " << cuda_mem_layout(s.layout->memory_layout()) << ";\n";
        break;
      default: break;
    }
  }

  const char* arrival() const {
    bool copies = false, async = false;
    for (size_t i = 0; i < spec_.operands.size(); ++i) {
      const OperandPath path = shape_.operands[i].path;
      if (!spec_.operands[i].load || (path != OperandPath::skewed && path != OperandPath::block_tile)) continue;
      (shape_.async && path == OperandPath::block_tile ? async : copies) = true;
    }
    return async ? "tp::Arrival::async" : copies ? "tp::Arrival::copied" : "tp::Arrival::none";
  }

  // Before the rounds: the block's run of tiles staged (skewed register tiles, then row-major
  // shared tiles, asynchronously in parts where the arch allows), each instance's copy of the
  // batch's one shared tiles, and the registers loaded straight from global memory for every round.
  void block_staging(std::ostream& os) const {
    std::ostringstream async;
    for (OperandPath path : {OperandPath::skewed, OperandPath::block_tile}) {
      each(path, [&](const FrameOperand& s, const OperandLaunch& o) {
        const char* T = dtype_cuda_name(s.dtype);
        const std::string name = area(s, path);
        os << "  const tp::BlockTiles<" << T << ", " << s.elements << ", " << (path == OperandPath::skewed ? "true" : "false")
           << "> " << name << "{reinterpret_cast<" << T << "*>(tp_smem + " << o.offset << ")};\n";
        if (!s.load) return;
        if (shape_.async && path == OperandPath::block_tile) {
          async << "    " << name << ".copy_part_async(block, " << global(s) << ", from, count);\n";
        } else {
          os << "  " << name << ".copy_in(block, " << global(s) << ");\n";
        }
      });
    }
    if (!async.str().empty()) {
      os << "  block.stage_async([&](const int from, const int count) {  // tiles [from, from + count) of the run\n"
         << async.str() << "  });\n";
    }
    bool once = false;
    each(OperandPath::once_tile, [&](const FrameOperand& s, const OperandLaunch& o) {
      const char* T = dtype_cuda_name(s.dtype);
      os << "  " << T << "* const " << s.name << " = reinterpret_cast<" << T << "*>(tp_smem + " << shape_.once_at + o.offset
         << " + static_cast<long long>(instance) * " << shape_.once_bytes << ");  // the batch's one tile\n"
         << "  tp::load_shared_tile<kThreads>(" << s.name << ", kMem_" << s.name << ", " << global(s) << ", "
         << s.elements << ", lane);\n";
      once = true;
    });
    if (once && shape_.threads > 1) os << "  " << sync() << "\n";
    each(OperandPath::direct, [&](const FrameOperand& s, const OperandLaunch&) {
      if (!s.load) return;
      os << "  " << register_array(s.dtype, s.name + "_rounds[kRounds]", s.place->slots) << ";\n"
         << "  block.load_rounds<" << s.elements << ">(" << s.name << "_rounds, " << global(s) << ");\n";
    });
  }

  // This instance's round: its operands taken from the round's loads, loaded where they lie or
  // gathered from the staging area, its shared tiles found in the block's run or moved into its
  // own; the body; the results stored. A staged operand's slots are taken a chunk at a time where
  // the shape says so (no other path then), the body covering one chunk per call.
  void round(std::ostream& os) {
    each(OperandPath::direct, [&](const FrameOperand& s, const OperandLaunch&) {
      const char* T = dtype_cuda_name(s.dtype);
      if (s.load) {
        os << "    " << T << " (&" << s.name << ")[" << s.place->slots << "] = " << s.name << "_rounds[round];\n";
      } else {
        os << "    " << register_array(s.dtype, s.name, s.place->slots) << ";\n";
      }
    });
    const bool chunked = shape_.chunk_slots > 0;
    const std::string pad = chunked ? "      " : "    ";
    const std::string from = chunked ? ", chunk * kBodySlots" : "";
    const std::string live = shape_.clamped ? "if (live) " : "";
    std::ostringstream chunk, scatters, placed_stores;
    // loaded where they lie: whole, or a chunk of the slots at a time (stored after the chunk's body)
    each(OperandPath::placed, [&](const FrameOperand& s, const OperandLaunch&) {
      std::ostream& to = chunked ? static_cast<std::ostream&>(chunk) : os;
      to << pad << register_array(s.dtype, s.name, chunked ? shape_.chunk_slots : s.place->slots) << ";\n";
      if (s.load) {
        to << pad << "tp::load_tile<Place_" << s.name << ">(" << s.name << ", "
           << (s.batch_broadcast ? global(s) : tile_at(s)) << ", lane" << from << ");\n";
      }
      if (chunked && s.store) {
        placed_stores << pad << live << "tp::store_tile<Place_" << s.name << ">(" << tile_at(s) << ", " << s.name
                 << ", lane" << from << ");\n";
      }
    });
    prefetched(os);
    each(OperandPath::skewed, [&](const FrameOperand& s, const OperandLaunch&) {
      chunk << pad << register_array(s.dtype, s.name, chunked ? shape_.chunk_slots : s.place->slots) << ";\n";
      if (s.load) chunk << pad << "stage_" << s.name << ".gather<Place_" << s.name << ">(" << s.name << ", slot, lane" << from << ");\n";
      if (!s.store) return;
      // with accum, threads holding a copy of an output read its old value from the staging
      // slot its owner now overwrites: all of them must have read first
      if (shape_.threads > 1 && scatters.str().empty()) scatters << pad << sync() << "\n";
      scatters << pad << "stage_" << s.name << ".scatter<Place_" << s.name << ">(" << s.name << ", slot, lane" << from << ");\n";
    });
    each(OperandPath::block_tile, [&](const FrameOperand& s, const OperandLaunch&) {
      chunk << "    " << dtype_cuda_name(s.dtype) << "* const " << s.name << " = tiles_" << s.name << ".at(slot);\n";
    });
    const bool own_tiles = shape_.any(OperandPath::instance_tile) && shape_.threads > 1;
    each(OperandPath::instance_tile, [&](const FrameOperand& s, const OperandLaunch& o) {
      const char* T = dtype_cuda_name(s.dtype);
      chunk << "    " << T << "* const " << s.name << " = reinterpret_cast<" << T << "*>(tp_smem + "
            << shape_.instance_tiles_at + o.offset << " + static_cast<long long>(instance) * " << shape_.instance_tiles_bytes
            << ");\n";
      if (s.load) {
        chunk << "    tp::load_shared_tile<kThreads>(" << s.name << ", kMem_" << s.name << ", " << tile_at(s) << ", "
              << s.elements << ", lane);\n";
      }
    });
    // tiles the instance filled itself must be whole before the body reads them, and read
    // before it stores them
    if (own_tiles) chunk << "    " << sync() << "\n";
    // a lane fold's source with slots that hold no element (a padded tile's tail): its identity there
    for (OperandPath path : {OperandPath::placed, OperandPath::prefetched, OperandPath::skewed}) {
      each(path, [&](const FrameOperand& s, const OperandLaunch&) {
        if (body_.fold_op.empty() || s.name != "in0" || !s.load) return;
        if (std::find(s.place->load.begin(), s.place->load.end(), -1) == s.place->load.end()) return;
        chunk << pad << "tp::pad_identity<" << body_.fold_op << ", Place_in0>(in0, lane" << from << ");\n";
      });
    }
    body_call(chunk, pad);
    if (chunked) {
      os << "    tp::for_each_chunk<" << first_output().place->slots / shape_.chunk_slots
         << ">([&](const int chunk) {  // kBodySlots of each thread's slots at a time\n"
         << chunk.str() << scatters.str() << placed_stores.str() << "    });\n";
      return;
    }
    os << chunk.str();
    if (own_tiles) os << "    " << sync() << "\n";
    each(OperandPath::instance_tile, [&](const FrameOperand& s, const OperandLaunch&) {
      if (s.store) {
        os << "    " << live << "tp::store_shared_tile<kThreads>(" << tile_at(s) << ", " << s.name << ", kMem_" << s.name
           << ", " << s.elements << ", lane);\n";
      }
    });
    each(OperandPath::direct, [&](const FrameOperand& s, const OperandLaunch&) {
      if (!s.store) return;
      if (s.folded) {
        os << "    " << live << (stores_every_slot(s) ? "tp::fold_run_into(" + fold_sum(s) + lane_offset(s)
                                                     : "tp::fold_tile_into<Place_" + s.name + ">(" + fold_sum(s))
           << ", " << s.name << (stores_every_slot(s) ? ");\n" : ", lane);\n");
      } else if (stores_every_slot(s)) {
        os << "    " << live << "tp::store_run(" << lane_run(s) << ", " << s.name << ");\n";
      } else {  // replicas: the lanes the store table names write their slots
        os << "    " << live << "tp::store_tile<Place_" << s.name << ">(" << tile_at(s) << ", " << s.name << ", lane);\n";
      }
    });
    for (OperandPath path : {OperandPath::placed, OperandPath::prefetched}) {
      each(path, [&](const FrameOperand& s, const OperandLaunch&) {
        if (!s.store) return;
        os << "    " << live << "tp::" << (s.folded ? "fold_tile_into" : "store_tile") << "<Place_" << s.name << ">("
           << (s.folded ? fold_sum(s) : tile_at(s)) << ", " << s.name << ", lane);\n";
      });
    }
    os << scatters.str();
    // the body's shared tiles are the instance's for every round: the next round's writes wait
    // for this one's reads
    if (body_.shared_bytes > 0 && shape_.rounds > 1 && shape_.threads > 1) os << "    " << sync() << "\n";
  }

  // The round's prefetched tiles: each taken (round 0's from global memory, later ones' from their
  // copies in shared memory), then the next round's copies started, after every take, since a
  // take waits for all of this thread's copies in flight.
  void prefetched(std::ostream& os) const {
    if (!shape_.any(OperandPath::prefetched)) return;
    std::ostringstream next;
    each(OperandPath::prefetched, [&](const FrameOperand& s, const OperandLaunch& o) {
      const char* T = dtype_cuda_name(s.dtype);
      const std::string share = "reinterpret_cast<" + std::string(T) + "*>(tp_smem + " + std::to_string(o.offset) + ")";
      os << "    " << register_array(s.dtype, s.name, s.place->slots) << ";\n"
         << "    block.take_prefetched<Place_" << s.name << ", " << s.elements << ">(" << s.name << ", " << share << ", "
         << global(s) << ", tile, round);\n";
      next << "    block.prefetch_next<Place_" << s.name << ", " << s.elements << ", " << s.place->slots << ">(" << share
           << ", " << global(s) << ", tile, round);\n";
    });
    os << next.str() << "    tp::commit_async();\n";
  }

  // The body's call; a run read in place is the view its call folds (tp::read_in_place, or
  // streamed through the warps' windows: BlockRun::stream_run).
  void body_call(std::ostream& os, const std::string& pad) const {
    std::vector<const FrameOperand*> runs;
    each(OperandPath::run, [&](const FrameOperand& s, const OperandLaunch&) { runs.push_back(&s); });
    if (runs.empty()) {
      os << indented(body_.call, pad);
      return;
    }
    std::string views, ats;
    for (const FrameOperand* s : runs) {
      views += std::string(views.empty() ? "" : ", ") + "const auto& " + s->name;
      ats += ", " + lane_run(*s);
    }
    if (shape_.window_stages > 0) {
      os << pad << "block.stream_run<" << shape_.window_stages << ">(tile, tp_smem + " << shape_.windows_at << ats << ", "
         << runs.front()->place->slots << ", [&](" << views << ") {\n";
    } else {
      os << pad << "tp::read_in_place([&](" << views << ") {\n";
    }
    os << indented(body_.call, pad + "  ") << pad << "}" << (shape_.window_stages > 0 ? "" : ats) << ");\n";
  }

  std::string lane_run(const FrameOperand& s) const { return tile_at(s) + lane_offset(s); }
  static std::string lane_offset(const FrameOperand& s) {
    return s.place->threads > 1 ? " + lane * " + std::to_string(s.place->slots) : "";
  }

  const FrameSpec& spec_;
  const LaunchShape& shape_;
  const KernelBody& body_;
  PlaceTables tables_;
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
  k.text = Renderer(spec, k).text(min_blocks);
  return k;
}

std::string register_array(DType dtype, const std::string& name, long long slots) {
  return std::string(dtype_size(dtype) == 2 ? "alignas(4) " : "") + dtype_cuda_name(dtype) + " " + name + "[" +
         std::to_string(slots) + "]";
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
    case ScopeKind::cluster: return "tp::cluster_sync();";
  }
  return "";
}

}  // namespace tp
