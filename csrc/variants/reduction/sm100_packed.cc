// reduction -> sm100_packed (priority 20, so it pre-empts local): a thread-scope float32
// reduction of a 1-D register vector of >= 8 elements to one value, with Blackwell's packed
// add.rn.ftz.f32x2 (sum) and 3-input max/min.f32. The seed's seven predicates, all
// evaluated; outside the gate it declines and local runs.
#include <memory>

#include "backends/cpu/staging.h"
#include "backends/cuda/codegen.h"
#include "backends/cpu/type_switch.h"
#include "dispatch/registry.h"
#include "layout/placement.h"
#include "tileprim/reduction/sm100_packed.cuh"
#include "variants/reduction/reduction_common.h"

namespace tp {
namespace {

struct PackedPlan : VariantPlan {
  HostReduceView view{};
  RegisterPlacement src_place, dst_place;
};

std::string exec_scope(const OpCall& call, const DispatchContext&) {
  return call.scope.kind == ScopeKind::thread ? "" : "unsupported exec_scope " + call.scope.kind_name();
}
std::string local_scope(const OpCall& call, const DispatchContext&) {
  const TileRef& src = call.inputs.at(0);
  const bool ok = src.storage == Storage::local && call.output.storage == Storage::local &&
                  src.dtype == call.output.dtype;
  return ok ? "" : "src/dst must be local scope with matching dtype on CUDA";
}
std::string dst_len(const OpCall& call, const DispatchContext&) {
  const long long n = reduction_axes(call).spatial_len;
  return n == 1 ? "" : "dst_len " + std::to_string(n) + " != 1";
}
std::string src_ndim(const OpCall& call, const DispatchContext&) {
  const size_t n = call.inputs.at(0).shape.size();
  return n == 1 ? "" : "src ndim " + std::to_string(n) + " != 1";
}
std::string dtype(const OpCall& call, const DispatchContext&) {
  const DType t = call.inputs.at(0).dtype;
  return t == DType::float32 ? "" : std::string("dtype ") + dtype_name(t) + " != float32";
}
std::string sm_version(const OpCall&, const DispatchContext& ctx) {
  return ctx.sm_version >= 100 ? "" : "sm_version " + std::to_string(ctx.sm_version) + " < 100";
}
std::string reduction_len(const OpCall& call, const DispatchContext&) {
  const long long n = reduction_axes(call).reduce_len;
  return n >= 8 ? "" : "reduction_len " + std::to_string(n) + " < 8";
}

class PackedReduction : public Variant {
 public:
  PackedReduction()
      : Variant("sm100_packed", 20, {"sum", "max", "min"},
                {{"exec_scope", exec_scope},
                 {"local_scope", local_scope},
                 {"dst_len", dst_len},
                 {"src_ndim", src_ndim},
                 {"dtype", dtype},
                 {"sm_version", sm_version},
                 {"reduction_len", reduction_len}}) {}

  void plan(Plan& plan) const override {
    const OpCall& call = plan.call;
    const ReductionAxes ax = reduction_axes(call);
    const TileLayout src = call.inputs[0].layout.value_or(TileLayout::row_major(ax.src_shape));
    const TileLayout dst = call.output.layout.value_or(TileLayout::row_major(ax.dst_shape));
    auto p = std::make_shared<PackedPlan>();
    p->view = fold_view(src, src.group(ax.src_shape), ax.reduced, dst, dst.group(ax.dst_shape));
    p->src_place = place_in_registers(src, call.scope, "layout");
    p->dst_place = place_in_registers(dst, call.scope, "out_layout");
    plan.call.output.layout = dst;
    plan.call.output.shape = ax.dst_shape;
    const bool sum = call.op == "sum";
    plan.set("algorithm", std::string(sum ? "packed_add_sum" : "3input_maxmin"));
    plan.set("slots", sum ? 8ll : 4ll);
    plan.set("reduction_len", ax.reduce_len);
    plan.set("full_chunks", ax.reduce_len / 8);
    plan.set("remainder", ax.reduce_len % 8);
    note_reduction_numerics(plan);
    if (sum) {
      plan.note("order",
                "slot k (k < 8) starts at element k (accum: slot 0 = e[0] + old) and adds element 8c+k "
                "of each further chunk with add.rn.ftz.f32x2; the remainder is added to slot 0 in order; "
                "then (s0,s1)+=(s2,s3), (s4,s5)+=(s6,s7), (s0,s1)+=(s4,s5) packed; result = s0 + s1");
      plan.note("ftz",
                "yes in the packed adds: subnormal inputs and results of add.rn.ftz.f32x2 flush to zero; "
                "the remainder, accum and final adds are scalar add.rn.f32 and keep subnormals");
    } else {
      plan.note("order",
                "slot i (i < 4) starts at op(e[2i], e[2i+1]) and folds e[8c+2i], e[8c+2i+1] of each further "
                "chunk with one 3-input max/min.f32; the remainder folds into slot 0; result = "
                "op3(op(s0, s1), s2, s3)");
      plan.note("ftz", "no: max/min are exact");
    }
    plan.detail = p;
  }

  void run_cpu(const Plan& plan, const HostTensors& io) const override {
    const auto& p = plan.detail_as<PackedPlan>();
    const bool accum = plan.call.accum;
    const long long src_n = plan.call.inputs[0].elements(), dst_n = plan.call.output.elements();
    const float* src = static_cast<const float*>(io.inputs[0]);
    float* out = static_cast<float*>(io.output);
    const ReduceKind kind = reduce_kind(plan.call);
    for (long long tile = 0; tile < io.tiles; ++tile) {
      const std::vector<float> src_regs = load_registers(p.src_place, src + tile * src_n);
      std::vector<float> dst_regs = accum ? load_registers(p.dst_place, out + tile * dst_n)
                                          : poisoned<float>(static_cast<size_t>(p.dst_place.slots));
      float* d = dst_regs.data();
      const float* s = src_regs.data();
      switch (kind) {
        case ReduceKind::sum: packed_add_sum(d, s, p.view, accum); break;
        case ReduceKind::max: packed_three_input_maxmin<reduce_op::Max>(d, s, p.view, accum); break;
        case ReduceKind::min: packed_three_input_maxmin<reduce_op::Min>(d, s, p.view, accum); break;
        case ReduceKind::max_nan: packed_three_input_maxmin<reduce_op::MaxNaN>(d, s, p.view, accum); break;
        case ReduceKind::min_nan: packed_three_input_maxmin<reduce_op::MinNaN>(d, s, p.view, accum); break;
      }
      store_registers(p.dst_place, dst_regs, out + tile * dst_n);
    }
  }

  void emit_cuda(const Plan& plan, KernelSource& k) const override {
    const auto& p = plan.detail_as<PackedPlan>();
    frame_for(plan.call.scope, 0, k);
    k.decls << reduce_view_cuda("kView", p.view, "tp::kUnrollRegisters");
    emit_load_registers(k, "src", DType::float32, p.src_place, "kSrcLoad", "in0_", plan.call.inputs[0].elements());
    if (plan.call.accum) {
      emit_load_registers(k, "dst", DType::float32, p.dst_place, "kDstLoad", "out_", 1);
    } else {
      k.body << "  float dst[" << p.dst_place.slots << "];\n";
    }
    const char* accum = plan.call.accum ? "true" : "false";
    const ReduceKind kind = reduce_kind(plan.call);
    if (kind == ReduceKind::sum) {
      k.body << "  tp::packed_add_sum(dst, src, kView, " << accum << ");\n";
    } else {
      k.body << "  tp::packed_three_input_maxmin<" << reduce_op_cuda(kind) << ">(dst, src, kView, " << accum << ");\n";
    }
    emit_store_registers(k, "dst", DType::float32, p.dst_place, "kDstStore", 1, plan.call.scope);
  }
};

}  // namespace

void register_reduction_sm100_packed(Registry& r) { r.add(std::make_unique<PackedReduction>()); }

}  // namespace tp
