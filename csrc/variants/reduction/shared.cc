// reduction -> shared (priority 10): source and destination in shared memory.
//   thread scope: the thread-wise loop of reduction -> local, on shared memory.
//   warp / warpgroup / cta: groups of G = min(next_pow2(reduction_len), 32, prev_pow2(threads))
//   lanes, one output per group at a time; lane l gathers sources l, l+G, ...; an XOR
//   butterfly of width G; lane 0 of the group writes; then the scope's barrier.
// The reference takes min(..., threads) itself; for thread counts that are not a power of
// two below 32 that is not a butterfly width, so the largest power of two <= threads is
// used. Threads past the last whole group idle, so any thread count is correct.
#include <memory>

#include "backends/cpu/host_lanes.h"
#include "backends/cuda/codegen.h"
#include "backends/cpu/staging.h"
#include "backends/cpu/type_switch.h"
#include "dispatch/registry.h"
#include "errors.h"
#include "tileprim/reduction/shared_groups.cuh"
#include "tileprim/reduction/thread_loop.cuh"
#include "variants/reduction/reduction_common.h"

namespace tp {
namespace {

struct SharedPlan : VariantPlan {
  TileLayout src_layout = TileLayout::row_major({1});
  TileLayout dst_layout = TileLayout::row_major({1});
  HostReduceView view{};
  GroupShape groups{1, 1, {0, {0, 0, 0, 0, 0}, 1}};
  bool thread_wise = false;
};

long long next_pow2(long long x) {
  long long p = 1;
  while (p < x) p *= 2;
  return p;
}
long long prev_pow2(long long x) {
  long long p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}

std::string storage_scope(const OpCall& call, const DispatchContext&) {
  const Storage s = call.inputs.at(0).storage, d = call.output.storage;
  if (is_shared(s) && is_shared(d)) return "";
  return std::string("storage scope mismatch: dst ") + storage_name(d) + ", src " + storage_name(s) +
         "; expected ['shared*']";
}

std::string shared_valid(const OpCall& call, const DispatchContext&) {
  const TileRef& src = call.inputs.at(0);
  if (src.dtype != call.output.dtype) {
    return std::string("dtype mismatch: dst ") + dtype_name(call.output.dtype) + ", src " + dtype_name(src.dtype);
  }
  const ReductionAxes ax = reduction_axes(call);
  if (call.output.layout && call.output.layout->size() != ax.spatial_len) {
    return "dst size " + std::to_string(call.output.layout->size()) + " != expected spatial size " +
           std::to_string(ax.spatial_len);
  }
  return "";
}

class SharedReduction : public Variant {
 public:
  SharedReduction()
      : Variant("shared", 10, {"sum", "max", "min"},
                {{"storage_scope", storage_scope}, {"shared_valid", shared_valid}}) {}

  void plan(Plan& plan) const override {
    const OpCall& call = plan.call;
    const ReductionAxes ax = reduction_axes(call);
    auto p = std::make_shared<SharedPlan>();
    p->src_layout = call.inputs[0].layout.value_or(TileLayout::row_major(ax.src_shape));
    p->dst_layout = call.output.layout.value_or(TileLayout::row_major(ax.dst_shape));
    p->view = fold_view(p->src_layout, p->src_layout.group(ax.src_shape), ax.reduced, p->dst_layout,
                        p->dst_layout.group(ax.dst_shape));
    p->thread_wise = call.scope.kind == ScopeKind::thread;
    plan.call.output.layout = p->dst_layout;
    plan.call.output.shape = ax.dst_shape;
    plan.set("path", std::string(p->thread_wise ? "thread_wise" : "group_shuffle"));
    plan.set("spatial_len", ax.spatial_len);
    plan.set("reduction_len", ax.reduce_len);
    if (!p->thread_wise) {
      const long long threads = call.scope.threads;
      const long long G = std::max(1ll, std::min({next_pow2(ax.reduce_len), 32ll, prev_pow2(threads)}));
      GroupShape& g = p->groups;
      g.group_size = static_cast<int>(G);
      g.groups = static_cast<int>(threads / G);
      g.masks = {0, {0, 0, 0, 0, 0}, g.group_size};
      for (int m = 1; m < G; m *= 2) g.masks.mask[g.masks.count++] = m;
      plan.set("group_size", G);
      plan.set("n_shuffles", static_cast<long long>(g.masks.count));
      plan.set("groups", static_cast<long long>(g.groups));
      plan.set("working_threads", static_cast<long long>(g.groups) * G);
      plan.set("steps", (ax.spatial_len + g.groups - 1) / g.groups);
      const char* sync = call.scope.kind == ScopeKind::cta         ? "cta_sync"
                         : call.scope.kind == ScopeKind::warpgroup ? "warpgroup_sync"
                                                                   : "warp_sync";
      plan.set("sync", std::string(sync));
    }
    note_reduction_numerics(plan);
    plan.note("order", p->thread_wise
                           ? "one thread folds the sources in order, from the identity (accum: from the old value)"
                           : "lane l folds sources l, l+G, l+2G, ... from the identity; then XOR butterfly with "
                             "masks 1, 2, 4, ... < G; accum: op(old, result)");
    plan.note("ftz", "no: subnormals kept");
    plan.detail = p;
  }

  void run_cpu(const Plan& plan, const HostTensors& io) const override {
    const auto& p = plan.detail_as<SharedPlan>();
    const bool accum = plan.call.accum;
    const long long src_n = plan.call.inputs[0].elements(), dst_n = plan.call.output.elements();
    with_host_type(plan.call.inputs[0].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      with_reduce_op(reduce_kind(plan.call), [&](auto op) {
        using Op = decltype(op);
        const T* src = static_cast<const T*>(io.inputs[0]);
        T* out = static_cast<T*>(io.output);
        for (long long tile = 0; tile < io.tiles; ++tile) {
          const std::vector<T> smem_src = load_memory(p.src_layout, src + tile * src_n);
          std::vector<T> smem_dst = accum ? load_memory(p.dst_layout, out + tile * dst_n)
                                          : poisoned<T>(static_cast<size_t>(p.dst_layout.span()));
          if (p.thread_wise) {
            thread_reduce<Op>(smem_dst.data(), smem_src.data(), p.view, accum);
          } else {
            const HostLanes working{p.groups.groups * p.groups.group_size};
            shared_group_reduce<Op>(working, smem_dst.data(), smem_src.data(), p.view, p.groups, accum);
          }
          store_memory(p.dst_layout, smem_dst, out + tile * dst_n);
        }
      });
    });
  }

  void emit_cuda(const Plan& plan, KernelSource& k) const override {
    const auto& p = plan.detail_as<SharedPlan>();
    const OpCall& call = plan.call;
    const DType t = call.inputs[0].dtype;
    const char* T = dtype_cuda_name(t);
    const long long size = dtype_size(t);
    const long long src_span = (p.src_layout.span() * size + 15) / 16 * 16 / size;  // dst starts 16-byte aligned
    k.use(t);
    frame_for(call.scope, (src_span + p.dst_layout.span()) * size, k);
    k.decls << "constexpr tp::MemLayout kSrcLayout = " << cuda_mem_layout(p.src_layout.memory_layout()) << ";\n"
            << "constexpr tp::MemLayout kDstLayout = " << cuda_mem_layout(p.dst_layout.memory_layout()) << ";\n"
            << reduce_view_cuda("kView", p.view, "tp::kUnrollMemory") << shuffle_masks_cuda("kMasks", p.groups.masks)
            << "constexpr tp::GroupShape kGroups = {" << p.groups.group_size << ", " << p.groups.groups
            << ", kMasks};\n";
    const long long src_n = call.inputs[0].elements(), dst_n = call.output.elements();
    k.body << "  const " << T << "* in0 = static_cast<const " << T << "*>(in0_) + tile * " << src_n << ";\n"
           << "  " << T << "* out = static_cast<" << T << "*>(out_) + tile * " << dst_n << ";\n"
           << "  " << T << "* smem_src = reinterpret_cast<" << T << "*>(tp_smem);\n"
           << "  " << T << "* smem_dst = smem_src + " << src_span << ";\n";
    // a row-major tile is copied as it is, 16 bytes at a time; others element by element
    const bool src_plain = p.src_layout == TileLayout::row_major(call.inputs[0].shape);
    const bool dst_plain = p.dst_layout == TileLayout::row_major(call.output.shape);
    if (src_plain) {
      k.body << "  tp::copy_to_shared<false>(smem_src, in0, " << src_n << ", lane, kThreads);\n";
    } else {
      emit_copy_to_shared(k, "smem_src", "in0", "kSrcLayout", src_n);
    }
    if (call.accum && dst_plain) {
      k.body << "  tp::copy_to_shared<false>(smem_dst, out, " << dst_n << ", lane, kThreads);\n";
    } else if (call.accum) {
      emit_copy_to_shared(k, "smem_dst", "out", "kDstLayout", dst_n);
    }
    const std::string sync = cuda_scope_sync(call.scope);
    const char* op = reduce_op_cuda(reduce_kind(call));
    const char* accum = call.accum ? "true" : "false";
    k.body << "  " << sync << "\n";
    if (p.thread_wise) {
      k.body << "  tp::thread_reduce<" << op << ">(smem_dst, smem_src, kView, " << accum << ");\n";
    } else {
      k.body << "  if (lane < " << p.groups.groups * p.groups.group_size << ") {\n"
             << "    tp::shared_group_reduce<" << op << ">(tp::DeviceLanes{lane}, smem_dst, smem_src, kView, kGroups, "
             << accum << ");\n  }\n";
    }
    k.body << "  " << sync << "\n";
    if (dst_plain) {
      k.body << "  tp::copy_from_shared<false>(out, smem_dst, " << dst_n << ", lane, kThreads);\n";
    } else {
      emit_copy_from_shared(k, "smem_dst", "out", "kDstLayout", dst_n);
    }
  }
};

}  // namespace

void register_reduction_shared(Registry& r) { r.add(std::make_unique<SharedReduction>()); }

}  // namespace tp
