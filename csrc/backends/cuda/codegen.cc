#include "backends/cuda/codegen.h"

#include <algorithm>

#include "tileprim/staging.cuh"

namespace tp {

namespace {
// Dynamic shared memory a block may take without opting in (the launcher opts in above it).
constexpr long long kDefaultSharedLimit = 48 * 1024;

long long align16(long long bytes) { return (bytes + 15) / 16 * 16; }
}  // namespace

void KernelSource::use(DType t) {
  uses_fp16_ |= t == DType::float16;
  uses_bf16_ |= t == DType::bfloat16;
}

std::string KernelSource::stage(const std::string& param, DType t, long long elements, bool load, bool store) {
  use(t);
  for (StagedOperand& s : staged_) {
    if (s.param == param) {
      s.load |= load;
      s.store |= store;
      return "stage_" + param;
    }
  }
  staged_.push_back({param, t, elements, load, store});
  return "stage_" + param;
}

void KernelSource::declare_table(const std::string& name, const std::vector<int>& values) {
  if (tables_.insert(name).second) decls << cuda_int_table(name, values);
}

long long KernelSource::staging_bytes(int instances) const {
  long long bytes = 0;
  for (const StagedOperand& s : staged_) {
    bytes += align16(static_cast<long long>(skewed_span(static_cast<int>(instances * s.elements))) * dtype_size(s.dtype));
  }
  return bytes;
}

long long KernelSource::shared_bytes() const { return staging_bytes(instances_) + instances_ * align16(variant_shared); }

void KernelSource::finish(int default_instances) {
  instances_ = default_instances;
  while (instances_ > 1 && shared_bytes() > kDefaultSharedLimit) --instances_;
}

int default_instances(const ExecScope& scope) {
  switch (scope.kind) {
    case ScopeKind::thread: return 128;
    case ScopeKind::warp: return 4;
    default: return 1;  // warpgroup: one per block, so its named barrier is barrier 1
  }
}

void frame_for(const ExecScope& scope, long long variant_shared_bytes, KernelSource& k) {
  k.threads = scope.threads;
  k.variant_shared = variant_shared_bytes;
}

std::string KernelSource::source() const {
  std::ostringstream os;
  os << "// tileprim kernel: " << comment << "\n";
  if (uses_fp16_) os << "#define TP_WITH_FP16 1\n";
  if (uses_bf16_) os << "#define TP_WITH_BF16 1\n";
  os << "#include <tileprim/tileprim.cuh>\n\n"
     << "namespace tp_gen {\n"
     << decls.str() << "}  // namespace tp_gen\n\n"
     << "extern \"C\" __global__ void __launch_bounds__(" << block_threads() << ")\n"
     << "tp_kernel(const void* __restrict__ in0_, const void* __restrict__ in1_, const void* __restrict__ in2_,\n"
     << "          void* __restrict__ out_, double s0, double s1, double s2, long long tiles) {\n"
     << "  using namespace tp_gen;\n"
     << "  constexpr int kThreads = " << threads << ";\n"
     << "  constexpr int kInstances = " << instances_ << ";\n"
     << "  const int instance = threadIdx.x / kThreads;\n"
     << "  const int lane = threadIdx.x % kThreads;\n"
     << "  const long long first = static_cast<long long>(blockIdx.x) * kInstances;\n"
     << "  const long long tile = first + instance;\n"
     << "  const long long valid = tiles - first < kInstances ? tiles - first : kInstances;\n"
     << "  (void)in0_; (void)in1_; (void)in2_; (void)s0; (void)s1; (void)s2; (void)lane; (void)valid;\n";
  if (shared_bytes() > 0) os << "  extern __shared__ __align__(16) unsigned char tp_smem_all[];\n";
  long long offset = 0;
  for (const StagedOperand& s : staged_) {
    const char* T = dtype_cuda_name(s.dtype);
    os << "  " << T << "* stage_" << s.param << " = reinterpret_cast<" << T << "*>(tp_smem_all + " << offset << ");\n";
    offset += align16(static_cast<long long>(skewed_span(static_cast<int>(instances_ * s.elements))) * dtype_size(s.dtype));
  }
  bool loads = false;
  for (const StagedOperand& s : staged_) {
    if (!s.load) continue;
    const char* T = dtype_cuda_name(s.dtype);
    os << "  tp::block_load(stage_" << s.param << ", static_cast<const " << T << "*>(" << s.param << ") + first * "
       << s.elements << ", static_cast<int>(valid) * " << s.elements << ");\n";
    loads = true;
  }
  if (loads) os << "  __syncthreads();\n";
  os << "  if (tile < tiles) {  // a whole scope instance is in or out together\n";
  if (variant_shared > 0) {
    os << "  unsigned char* tp_smem = tp_smem_all + " << offset << " + static_cast<long long>(instance) * "
       << align16(variant_shared) << ";\n";
  }
  os << body.str() << "  }\n";
  for (const StagedOperand& s : staged_) {
    if (!s.store) continue;
    const char* T = dtype_cuda_name(s.dtype);
    os << "  __syncthreads();\n"
       << "  tp::block_store(static_cast<" << T << "*>(" << s.param << ") + first * " << s.elements << ", stage_"
       << s.param << ", static_cast<int>(valid) * " << s.elements << ");\n";
  }
  os << "}\n";
  return os.str();
}

std::string cuda_int_table(const std::string& name, const std::vector<int>& values) {
  std::ostringstream os;
  os << "constexpr int " << name << "[" << std::max<size_t>(values.size(), 1) << "] = {";
  for (size_t i = 0; i < values.size(); ++i) os << (i ? (i % 32 ? ", " : ",\n    ") : "") << values[i];
  if (values.empty()) os << "-1";
  os << "};\n";
  return os.str();
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

namespace {

// A placement's table, indexed [slot] when every thread reads the same (one thread, or a
// thread-private tile), else [slot * kThreads + lane].
bool per_slot(const RegisterPlacement& p, bool loads) { return p.threads == 1 || (loads && p.thread_private); }

std::vector<int> table_of(const RegisterPlacement& p, const std::vector<int>& full, bool loads) {
  if (!per_slot(p, loads)) return full;
  std::vector<int> slots(static_cast<size_t>(p.slots));
  for (int s = 0; s < p.slots; ++s) slots[s] = full[static_cast<size_t>(s) * p.threads];
  return slots;
}

}  // namespace

void emit_load_registers(KernelSource& k, const std::string& var, DType t, const RegisterPlacement& p,
                         const std::string& table, const std::string& param, long long elements) {
  k.declare_table(table, table_of(p, p.load, true));
  const std::string stage = k.stage(param, t, elements, true, false);
  const char* T = dtype_cuda_name(t);
  k.body << "  " << T << " " << var << "[" << p.slots << "];\n"
         << "#pragma unroll\n"
         << "  for (int s = 0; s < " << p.slots << "; ++s) {\n"
         << "    const int e = " << table << (per_slot(p, true) ? "[s]" : "[s * kThreads + lane]") << ";\n"
         << "    " << var << "[s] = e >= 0 ? " << stage << "[tp::skewed(instance * " << elements
         << " + e)] : tp::limits<" << T << ">::quiet_nan();\n"
         << "  }\n";
}

void emit_store_registers(KernelSource& k, const std::string& var, DType t, const RegisterPlacement& p,
                          const std::string& table, long long elements, const ExecScope& scope) {
  k.declare_table(table, table_of(p, p.store, false));
  const std::string stage = k.stage("out_", t, elements, false, true);
  if (p.threads > 1) k.body << "  " << cuda_scope_sync(scope) << "\n";
  k.body << "#pragma unroll\n"
         << "  for (int s = 0; s < " << p.slots << "; ++s) {\n"
         << "    const int e = " << table << (per_slot(p, false) ? "[s]" : "[s * kThreads + lane]") << ";\n"
         << "    if (e >= 0) " << stage << "[tp::skewed(instance * " << elements << " + e)] = " << var << "[s];\n"
         << "  }\n";
}

void emit_copy_to_shared(KernelSource& k, const std::string& smem, const std::string& from,
                         const std::string& layout, long long elements) {
  k.body << "  for (long long e = lane; e < " << elements << "; e += kThreads) " << smem
         << "[tp::memory_offset(" << layout << ", e)] = " << from << "[e];\n";
}

void emit_copy_from_shared(KernelSource& k, const std::string& smem, const std::string& to,
                           const std::string& layout, long long elements) {
  k.body << "  for (long long e = lane; e < " << elements << "; e += kThreads) " << to << "[e] = " << smem
         << "[tp::memory_offset(" << layout << ", e)];\n";
}

std::string cuda_scope_sync(const ExecScope& scope) {
  switch (scope.kind) {
    case ScopeKind::cta: return "__syncthreads();";
    // one warpgroup per block: named barrier 1 over its 128 threads (0 is __syncthreads)
    case ScopeKind::warpgroup: return "asm volatile(\"bar.sync 1, 128;\" ::: \"memory\");";
    case ScopeKind::warp: return "__syncwarp();";
    case ScopeKind::thread: return "";
  }
  return "";
}

}  // namespace tp
