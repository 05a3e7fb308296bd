#include "backends/cuda/codegen.h"

#include <algorithm>

namespace tp {

namespace {
// Dynamic shared memory a block may take without opting in (the launcher opts in above it).
constexpr long long kDefaultSharedLimit = 48 * 1024;
}

void KernelSource::use(DType t) {
  uses_fp16 |= t == DType::float16;
  uses_bf16 |= t == DType::bfloat16;
}

void frame_for(const ExecScope& scope, long long shared_bytes, KernelSource& k) {
  k.threads = scope.threads;
  k.shared_bytes = (shared_bytes + 15) / 16 * 16;
  switch (scope.kind) {
    case ScopeKind::thread: k.instances = 128; break;
    case ScopeKind::warp: k.instances = 4; break;
    default: k.instances = 1; break;
  }
  if (k.shared_bytes > 0) {
    k.instances = static_cast<int>(std::max(1ll, std::min<long long>(k.instances, kDefaultSharedLimit / k.shared_bytes)));
  }
}

std::string KernelSource::source() const {
  std::ostringstream os;
  os << "// tileprim kernel: " << comment << "\n";
  if (uses_fp16) os << "#define TP_WITH_FP16 1\n";
  if (uses_bf16) os << "#define TP_WITH_BF16 1\n";
  os << "#include <tileprim/tileprim.cuh>\n\n"
     << "namespace tp_gen {\n"
     << decls.str() << "}  // namespace tp_gen\n\n"
     << "extern \"C\" __global__ void __launch_bounds__(" << block_threads() << ")\n"
     << "tp_kernel(const void* __restrict__ in0_, const void* __restrict__ in1_, const void* __restrict__ in2_,\n"
     << "          void* __restrict__ out_, double s0, double s1, double s2, long long tiles) {\n"
     << "  using namespace tp_gen;\n"
     << "  constexpr int kThreads = " << threads << ";\n"
     << "  constexpr int kInstances = " << instances << ";\n"
     << "  const int instance = threadIdx.x / kThreads;\n"
     << "  const int lane = threadIdx.x % kThreads;\n"
     << "  const long long tile = static_cast<long long>(blockIdx.x) * kInstances + instance;\n"
     << "  if (tile >= tiles) return;  // a whole scope instance leaves together\n";
  if (shared_bytes > 0) {
    os << "  extern __shared__ __align__(16) unsigned char tp_smem_all[];\n"
       << "  unsigned char* tp_smem = tp_smem_all + static_cast<long long>(instance) * " << shared_bytes << ";\n";
  }
  os << "  (void)in0_; (void)in1_; (void)in2_; (void)s0; (void)s1; (void)s2; (void)lane;\n"
     << body.str() << "}\n";
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

void declare_table(KernelSource& k, const std::string& name, const std::vector<int>& values) {
  if (k.tables.insert(name).second) k.decls << cuda_int_table(name, values);
}

namespace {

// A placement's table, indexed [slot] when every thread reads the same (one thread, or a
// thread-private tile), else [slot * kThreads + lane].
std::string table_index(const RegisterPlacement& p, bool loads) {
  return (p.threads == 1 || (loads && p.thread_private)) ? "[s]" : "[s * kThreads + lane]";
}

std::vector<int> compact_table(const RegisterPlacement& p, const std::vector<int>& full, bool loads) {
  if (!(p.threads == 1 || (loads && p.thread_private))) return full;
  std::vector<int> slots(static_cast<size_t>(p.slots));
  for (int s = 0; s < p.slots; ++s) slots[s] = full[static_cast<size_t>(s) * p.threads];
  return slots;
}

}  // namespace

void emit_load_registers(KernelSource& k, const std::string& var, DType t, const RegisterPlacement& p,
                         const std::string& table, const std::string& from) {
  declare_table(k, table, compact_table(p, p.load, true));
  const char* T = dtype_cuda_name(t);
  k.body << "  " << T << " " << var << "[" << p.slots << "];\n"
         << "#pragma unroll\n"
         << "  for (int s = 0; s < " << p.slots << "; ++s) {\n"
         << "    const int e = " << table << table_index(p, true) << ";\n"
         << "    " << var << "[s] = e >= 0 ? " << from << "[e] : tp::limits<" << T << ">::quiet_nan();\n"
         << "  }\n";
}

void emit_store_registers(KernelSource& k, const std::string& var, const RegisterPlacement& p,
                          const std::string& table, const std::string& to) {
  declare_table(k, table, compact_table(p, p.store, false));
  k.body << "#pragma unroll\n"
         << "  for (int s = 0; s < " << p.slots << "; ++s) {\n"
         << "    const int e = " << table << table_index(p, false) << ";\n"
         << "    if (e >= 0) " << to << "[e] = " << var << "[s];\n"
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
