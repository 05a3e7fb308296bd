// reduction -> sm100_packed (priority 20, so it pre-empts local): a thread-scope float32
// reduction of a 1-D register vector of >= 8 elements to one value, with Blackwell's packed
// add.rn.ftz.f32x2 (sum) and 3-input max/min.f32. The op it serves and the seed's seven
// predicates, all evaluated; outside the gate it declines and local runs.
#include <memory>

#include "dispatch/registry.h"
#include "variants/reduction/reduction_common.h"

namespace tp {
namespace {

// The packed instructions exist for these ops only (packed_fold in sm100_packed.cuh).
std::string op(const OpCall& call, const DispatchContext&) {
  const ReductionKind k = reduction_op(call).kind;
  const bool served = k == ReductionKind::sum || k == ReductionKind::max || k == ReductionKind::min;
  return served ? "" : "sm100_packed serves sum, max, min; not " + call.op();
}
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
      : Variant("sm100_packed", 20, OpFamily::reduction,
                {{"op", op},
                 {"exec_scope", exec_scope},
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
    plan.call.output.layout = dst;
    plan.call.output.shape = ax.dst_shape;
    const bool sum = reduction_op(call).kind == ReductionKind::sum;
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
    stage_registers(plan, src, dst);
    plan.detail = p;
  }
};

}  // namespace

void register_reduction_sm100_packed(Registry& r) { r.add(std::make_unique<PackedReduction>()); }

}  // namespace tp
