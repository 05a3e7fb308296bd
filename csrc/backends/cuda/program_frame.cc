#include "backends/cuda/program_frame.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "backends/cuda/kernel_frame.h"
#include "backends/cuda/tile_executor.h"
#include "dispatch/architecture.h"
#include "errors.h"
#include "layout/placement.h"

namespace tp {

namespace {

// Shared memory a block takes before the frame stops adding instances (kernel_frame.cc's).
constexpr long long kSharedPerBlockTarget = 100 * 1024;

long long align16(long long bytes) { return (bytes + 15) / 16 * 16; }

long long elements_of(const ProgramValue& v) { return v.elements(); }

bool in_registers(const ProgramValue& v) { return v.layout && v.storage == Storage::local; }

// The copy reads its source from a scratch area: a register source is spilled there whenever
// the result is not a shared tile of the same shape (another thread may hold what this one
// needs).
bool spills(const ProgramPlan& plan, const ProgramStep& step) {
  if (step.op != "copy") return false;
  const ProgramValue& src = plan.values.at(step.operands[0]);
  const ProgramValue& dst = plan.values.at(step.result);
  return in_registers(src) && (in_registers(dst) || src.shape != dst.shape);
}

// A placement in closed form (tp::RunPlace): lane l holds in slot s element
// ((s / vec) * owners + l % owners) * vec + s % vec, lanes < owners write back. {0, 0}: none.
std::pair<int, int> run_form(const RegisterPlacement& p) {
  const int T = p.threads, S = p.slots;
  int owners = 0;
  while (owners < T && p.store[static_cast<size_t>(owners)] >= 0) ++owners;
  if (owners == 0) return {0, 0};
  for (int vec = S; vec >= 1; --vec) {
    if (S % vec != 0) continue;
    bool ok = true;
    for (int s = 0; s < S && ok; ++s) {
      for (int t = 0; t < T && ok; ++t) {
        const int e = ((s / vec) * owners + t % owners) * vec + s % vec;
        const size_t at = static_cast<size_t>(s) * T + t;
        ok = p.load[at] == e && p.store[at] == (t < owners ? e : -1);
      }
    }
    if (ok) return {owners, vec};
  }
  return {0, 0};
}

std::string table(const std::string& name, const std::vector<int>& values) {
  std::ostringstream os;
  os << "__device__ constexpr int " << name << "[" << values.size() << "] = {";
  for (size_t i = 0; i < values.size(); ++i) os << (i ? (i % 32 ? ", " : ",\n    ") : "") << values[i];
  os << "};\n";
  return os.str();
}

// A double constant, bit for bit (NaN payloads and infinities too).
std::string exact_double(double x) {
  unsigned long long bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  char text[48];
  std::snprintf(text, sizeof text, "__longlong_as_double(0x%016llxLL)", bits);
  return text;
}

// Element e of a broadcast result reads its source at memory_offset(kBc, e): the result's
// dims, the source's row-major strides, 0 where the source has extent 1 (right-aligned).
MemLayout broadcast_map(const std::vector<long long>& from, const std::vector<long long>& to) {
  MemLayout L{};
  if (to.size() > static_cast<size_t>(kMaxIters)) throw ValueError("copy: a broadcast of more than 16 dims");
  L.n = static_cast<int>(to.size());
  long long stride = 1;
  for (size_t k = 0; k < to.size(); ++k) {
    const size_t d = to.size() - 1 - k;
    L.extent[d] = to[d];
    const long long extent = k < from.size() ? from[from.size() - 1 - k] : 1;
    L.stride[d] = extent == 1 ? 0 : stride;
    stride *= extent;
  }
  return L;
}

std::string named(const char* prefix, int id) { return prefix + std::to_string(id); }

class ProgramFrame {
 public:
  ProgramFrame(const ProgramPlan& plan, const std::string& arch)
      : plan_(plan), arch_(arch), async_(sm_version(arch) >= 80) {
    launch_ = program_launch(plan, arch);
    for (size_t i = 0; i < plan.values.size(); ++i) {
      const ProgramValue& v = plan.values[i];
      if (v.input >= 0) inputs_.push_back(static_cast<int>(i));
    }
    std::sort(inputs_.begin(), inputs_.end(),
              [&](int a, int b) { return plan.values[a].input < plan.values[b].input; });
  }

  const ProgramLaunch& launch() const { return launch_; }

  std::string text() {
    std::ostringstream decls, body;
    declare(decls, body);
    stage_inputs(body);
    for (size_t k = 0; k < plan_.steps.size(); ++k) step(body, decls, k);
    store_outputs(body);

    std::ostringstream os;
    os << "// tileprim program kernel: " << plan_.name << " at " << plan_.scope.str() << ", " << plan_.steps.size()
       << " steps in one kernel\n";
    bool f16 = false, bf16 = false;
    for (const ProgramValue& v : plan_.values) {
      f16 |= v.dtype == DType::float16;
      bf16 |= v.dtype == DType::bfloat16;
    }
    if (f16) os << "#define TP_WITH_FP16 1\n";
    if (bf16) os << "#define TP_WITH_BF16 1\n";
    os << "#include <tileprim/tileprim.cuh>\n#include <tileprim/program.cuh>\n\n"
       << "namespace tp_gen {\n"
       << "constexpr int kThreads = " << launch_.threads << ";\n"
       << "constexpr int kInstances = " << launch_.instances << ";\n"
       << decls.str() << "}  // namespace tp_gen\n\n"
       << "extern \"C\" __global__ void __launch_bounds__(" << launch_.block_threads() << ")\n"
       << "tp_kernel(" << params() << ") {\n"
       << "  using namespace tp_gen;\n"
       << "  const int instance = threadIdx.x / kThreads;\n"
       << "  const int lane = threadIdx.x % kThreads;\n"
       << "  const long long tile = static_cast<long long>(blockIdx.x) * kInstances + instance;\n"
       << "  if (tile >= tiles) return;  // an instance's barriers are its own\n"
       << "  (void)lane;\n";
    if (launch_.shared_bytes() > 0) {
      os << "  extern __shared__ __align__(16) unsigned char tp_smem[];\n"
         << "  unsigned char* const smem = tp_smem + static_cast<long long>(instance) * " << launch_.instance_bytes()
         << ";\n"
         << "  unsigned char* const scratch = smem + " << launch_.tile_bytes << ";\n"
         << "  (void)scratch;\n";
    }
    os << body.str() << "}\n";
    return os.str();
  }

 private:
  const ProgramValue& value(int id) const { return plan_.values.at(static_cast<size_t>(id)); }
  const char* type(int id) const { return dtype_cuda_name(value(id).dtype); }

  std::string params() const {
    std::ostringstream os;
    for (int id : inputs_) os << "const " << type(id) << "* __restrict__ arg" << value(id).input << ", ";
    for (size_t j = 0; j < plan_.outputs.size(); ++j) os << type(plan_.outputs[j]) << "* __restrict__ res" << j << ", ";
    os << "long long tiles";
    return os.str();
  }

  // Each placed tile: registers as an array with its placement type, shared tiles as a pointer
  // at their live-range offset with their memory layout.
  void declare(std::ostream& decls, std::ostream& body) {
    for (size_t i = 0; i < plan_.values.size(); ++i) {
      const ProgramValue& v = plan_.values[i];
      if (!v.layout) continue;
      const int id = static_cast<int>(i);
      const char* T = type(id);
      body << "  // " << v.name << ": " << dtype_name(v.dtype) << shape_str(v.shape) << " " << v.placement() << "\n";
      if (in_registers(v)) {
        const RegisterPlacement p = place_in_registers(*v.layout, plan_.scope, v.name);
        const auto [owners, vec] = run_form(p);
        if (owners > 0) {
          decls << "using " << named("P", id) << " = tp::RunPlace<" << owners << ", " << vec << ">;\n";
        } else {
          decls << table(named("kLoad", id), p.load) << table(named("kStore", id), p.store) << "using "
                << named("P", id) << " = tp::TablePlace<kThreads, " << named("kLoad", id) << ", "
                << named("kStore", id) << ">;\n";
        }
        body << "  " << T << " " << named("v", id) << "[" << p.slots << "];\n";
      } else {
        decls << "constexpr tp::MemLayout " << named("kMem", id) << " = " << cuda_mem_layout(v.layout->memory_layout())
              << ";\n";
        body << "  " << T << "* const " << named("v", id) << " = reinterpret_cast<" << T << "*>(smem + "
             << v.shared_offset << ");\n";
      }
    }
  }

  std::string tile_of(int id, const std::string& base) const {
    const ProgramValue& v = value(id);
    return v.batch_broadcast ? base : base + " + tile * " + std::to_string(elements_of(v));
  }

  bool row_major(const ProgramValue& v) const { return *v.layout == TileLayout::row_major(v.shape); }

  // Shared inputs first (asynchronously where the arch allows), register inputs straight into
  // registers while those are in flight, then one barrier.
  void stage_inputs(std::ostream& os) {
    bool shared = false, waits = false;
    for (int id : inputs_) {
      const ProgramValue& v = value(id);
      if (!v.layout || in_registers(v)) continue;
      shared = true;
      const std::string from = tile_of(id, "arg" + std::to_string(v.input));
      const std::string n = std::to_string(elements_of(v));
      if (row_major(v) && async_) {
        os << "  tp::copy_to_shared_async(" << named("v", id) << ", " << from << ", " << n << ", lane, kThreads);\n";
        waits = true;
      } else if (row_major(v)) {
        os << "  tp::copy_to_shared<false>(" << named("v", id) << ", " << from << ", " << n << ", lane, kThreads);\n";
      } else {
        os << "  tp::load_shared_tile<kThreads>(" << named("v", id) << ", " << named("kMem", id) << ", " << from
           << ", " << n << ", lane);\n";
      }
    }
    if (waits) os << "  tp::commit_async();\n";
    for (int id : inputs_) {
      const ProgramValue& v = value(id);
      if (!in_registers(v)) continue;
      os << "  tp::load_tile<" << named("P", id) << ">(" << named("v", id) << ", "
         << tile_of(id, "arg" + std::to_string(v.input)) << ", lane);\n";
    }
    if (waits) os << "  tp::wait_async(0);\n";
    if (shared) sync(os);
  }

  void sync(std::ostream& os) {
    if (synced_ || launch_.threads == 1) return;
    os << "  " << cuda_scope_sync(plan_.scope, launch_.instances) << "\n";
    synced_ = true;
  }

  bool touches_shared(const ProgramStep& s) const {
    if (!in_registers(value(s.result))) return true;
    for (int id : s.operands) {
      if (id >= 0 && !in_registers(value(id))) return true;
    }
    return false;
  }

  void step(std::ostream& os, std::ostream& decls, size_t k) {
    const ProgramStep& s = plan_.steps[k];
    os << "  // step " << k << ": " << value(s.result).name << " = " << s.op << " [" << s.bound->plan().variant << "]"
       << (s.where.empty() ? "" : " at " + s.where) << "\n";
    if (!s.sync_before.empty() || touches_shared(s)) sync(os);
    if (s.op == "copy") {
      copy(os, decls, s, k);
    } else {
      call(os, decls, s, k);
    }
    synced_ = false;
  }

  // One call of the step's device template, as its standalone kernel makes it, on this
  // program's tiles.
  void call(std::ostream& os, std::ostream& decls, const ProgramStep& s, size_t k) {
    const Plan& plan = s.bound->plan();
    const KernelBody body = cuda::kernel_body(plan);
    const std::string ns = "step" + std::to_string(k);
    decls << "namespace " << ns << " {\n" << body.decls;
    if (body.maps_slots) decls << "constexpr int kBodySlots = " << plan.staged_output().place->slots << ";\n";
    decls << "}  // namespace " << ns << "\n";
    os << "  {\n    using namespace tp_gen::" << ns << ";\n";
    for (size_t i = 0; i < s.operands.size(); ++i) {
      const int id = s.operands[i];
      if (id < 0) {
        os << "    const double s" << i << " = " << exact_double(s.scalars.at(i)) << ";\n";
      } else {
        alias(os, "in" + std::to_string(i), id);
      }
    }
    alias(os, "out", s.result);
    os << "    " << body.call << "\n  }\n";
  }

  void alias(std::ostream& os, const std::string& name, int id) const {
    if (in_registers(value(id))) {
      os << "    auto& " << name << " = " << named("v", id) << ";\n";
    } else {
      os << "    " << type(id) << "* const " << name << " = " << named("v", id) << ";\n";
    }
  }

  // A copy step: the result's elements read from the source where it lies (a register source
  // through the scratch area unless it scatters straight into a shared tile of its shape).
  void copy(std::ostream& os, std::ostream& decls, const ProgramStep& s, size_t k) {
    const int a = s.operands.at(0), r = s.result;
    const ProgramValue &src = value(a), &dst = value(r);
    const char* T = type(r);
    const bool broadcast = src.shape != dst.shape;
    const std::string index = broadcast ? "tp::memory_offset(kBc" + std::to_string(k) + ", e)" : "e";
    if (broadcast) {
      decls << "constexpr tp::MemLayout kBc" << k << " = " << cuda_mem_layout(broadcast_map(src.shape, dst.shape))
            << ";\n";
    }
    std::string source;
    if (in_registers(src) && !in_registers(dst) && !broadcast) {
      os << "  tp::scatter<" << named("P", a) << ">(" << named("v", a) << ", lane, [&](long long e, " << T
         << " x) { " << named("v", r) << "[tp::memory_offset(" << named("kMem", r) << ", e)] = x; });\n";
      return;
    }
 if (in_registers(src)) {
      sync(os);  // the scratch area's last readers are done
      os << "  {\n    " << T << "* const spill = reinterpret_cast<" << T << "*>(scratch);\n"
         << "    tp::scatter<" << named("P", a) << ">(" << named("v", a) << ", lane, [&](long long e, " << T
         << " x) { spill[e] = x; });\n  }\n";
      synced_ = false;
      sync(os);
      source = "reinterpret_cast<const " + std::string(T) + "*>(scratch)[" + index + "]";
    } else {
      source = named("v", a) + "[tp::memory_offset(" + named("kMem", a) + ", " + index + ")]";
    }
    if (in_registers(dst)) {
      os << "  tp::gather<" << named("P", r) << ">(" << named("v", r) << ", lane, [&](long long e) { return "
         << source << "; });\n";
    } else {
      os << "  tp::fill_shared<kThreads>(" << named("v", r) << ", " << named("kMem", r) << ", " << elements_of(dst)
         << ", lane, [&](long long e) { return " << source << "; });\n";
    }
  }

  void store_outputs(std::ostream& os) {
    os << "  // results\n";
    for (size_t j = 0; j < plan_.outputs.size(); ++j) {
      const int id = plan_.outputs[j];
      const ProgramValue& v = value(id);
      const std::string to = "res" + std::to_string(j) + " + tile * " + std::to_string(elements_of(v));
      if (in_registers(v)) {
        os << "  tp::store_tile<" << named("P", id) << ">(" << to << ", " << named("v", id) << ", lane);\n";
        continue;
      }
      sync(os);
      if (row_major(v)) {
        os << "  tp::copy_from_shared<false>(" << to << ", " << named("v", id) << ", " << elements_of(v)
           << ", lane, kThreads);\n";
      } else {
        os << "  tp::store_shared_tile<kThreads>(" << to << ", " << named("v", id) << ", " << named("kMem", id)
           << ", " << elements_of(v) << ", lane);\n";
      }
    }
  }

  const ProgramPlan& plan_;
  std::string arch_;
  bool async_;
  ProgramLaunch launch_;
  std::vector<int> inputs_;  // value ids of the program's inputs, in argument order
  bool synced_ = false;      // nothing has run since the last barrier
};

}  // namespace

ProgramLaunch program_launch(const ProgramPlan& plan, const std::string& arch) {
  ProgramLaunch l;
  l.threads = plan.scope.threads;
  std::tie(l.instances, l.why) = scope_instances(plan.scope);
  l.tile_bytes = align16(plan.shared_bytes);
  for (const ProgramStep& s : plan.steps) {
    if (!spills(plan, s)) continue;
    const ProgramValue& src = plan.values.at(s.operands[0]);
    l.scratch_bytes = std::max(l.scratch_bytes, align16(src.elements() * dtype_size(src.dtype)));
  }
  const long long limit = max_shared_per_block(arch);
  if (l.instance_bytes() > limit) {
    throw ValueError(plan.name + ": one instance needs " + std::to_string(l.instance_bytes()) +
                     " bytes of shared memory (tiles " + std::to_string(l.tile_bytes) + ", copy scratch " +
                     std::to_string(l.scratch_bytes) + "); " + arch + " allows " + std::to_string(limit) +
                     " per block. Fix: a smaller tile (more batch_dims) or a scope with more threads");
  }
  const int wanted = l.instances;
  while (l.instances > 1 && l.shared_bytes() > kSharedPerBlockTarget) --l.instances;
  if (l.instances < wanted) {
    l.why = std::to_string(l.instances) + " instances: one more would take " +
            std::to_string((l.instances + 1) * l.instance_bytes()) + " bytes of shared memory, past " +
            std::to_string(kSharedPerBlockTarget);
  }
  return l;
}

ProgramSource render_program(const ProgramPlan& plan, const std::string& arch) {
  ProgramFrame frame(plan, arch);
  ProgramSource out;
  out.text = frame.text();
  out.launch = frame.launch();
  return out;
}

}  // namespace tp
