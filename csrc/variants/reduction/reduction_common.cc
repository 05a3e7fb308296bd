#include "variants/reduction/reduction_common.h"

#include <memory>
#include <stdexcept>

#include "errors.h"
#include "layout/placement.h"

namespace tp {

ReductionAxes reduction_axes(const OpCall& call) {
  ReductionAxes r;
  r.src_shape = call.inputs.at(0).shape;
  r.reduced.assign(r.src_shape.size(), false);
  for (int a : call.axes) r.reduced[a] = true;
  for (size_t d = 0; d < r.src_shape.size(); ++d) {
    if (r.reduced[d]) {
      r.reduce_len *= r.src_shape[d];
    } else {
      r.spatial_len *= r.src_shape[d];
      r.dst_shape.push_back(r.src_shape[d]);
    }
  }
  if (r.dst_shape.empty()) r.dst_shape.push_back(1);
  return r;
}

const ReductionOp& reduction_op(const OpCall& call) {
  if (!call.def->reduction) throw std::logic_error("op " + call.op() + " has no reduction descriptor");
  return *call.def->reduction;
}

const std::string& reduce_functor(const OpCall& call) {
  return call.flag("propagate_nan") ? call.def->device_fn_nan : call.def->device_fn;
}

namespace {

void append_memory_iters(const DimIters& dim, MemLayout& L) {
  for (const Iter& it : dim.iters) {
    if (is_thread_axis(it.axis)) continue;
    if (L.n == kMaxIters) throw Decline("the fold needs more than 16 memory iters");
    L.extent[L.n] = it.extent;
    L.stride[L.n] = it.stride;
    ++L.n;
  }
}

MemLayout base_of(const TileLayout& layout) {
  MemLayout L{};
  L.offset = layout.offset().count(Axis::m) ? layout.offset().at(Axis::m) : 0;
  L.swizzle = layout.swizzle();
  return L;
}

}  // namespace

FoldView fold_view(const TileLayout& src, const std::vector<DimIters>& src_dims, const std::vector<bool>& reduced,
                   const TileLayout& dst, const std::vector<DimIters>& dst_dims) {
  FoldView v{};
  v.src = base_of(src);
  v.dst = base_of(dst);
  long long spatial = 1, reduce = 1, dst_local = 1;
  for (size_t d = 0; d < src_dims.size(); ++d) {
    if (!reduced[d]) {
      append_memory_iters(src_dims[d], v.src);
      spatial *= src_dims[d].local_extent;
    }
  }
  for (size_t d = 0; d < src_dims.size(); ++d) {
    if (reduced[d]) {
      append_memory_iters(src_dims[d], v.src);
      reduce *= src_dims[d].local_extent;
    }
  }
  for (const DimIters& dim : dst_dims) {
    append_memory_iters(dim, v.dst);
    dst_local *= dim.local_extent;
  }
  if (dst_local != spatial) {
    throw Decline("each thread holds " + std::to_string(spatial) + " outputs of the source but " +
                  std::to_string(dst_local) + " registers of the destination");
  }
  if (v.src.n == 0) v.src = MemLayout{1, {1}, {0}, v.src.offset, v.src.swizzle};
  if (v.dst.n == 0) v.dst = MemLayout{1, {1}, {0}, v.dst.offset, v.dst.swizzle};
  v.spatial = static_cast<int>(spatial);
  v.reduce = static_cast<int>(reduce);
  return v;
}

Predicate storage_predicate(bool shared) {
  return {"storage_scope", [shared](const OpCall& call, const DispatchContext&) -> std::string {
            const Storage s = call.inputs.at(0).storage, d = call.output.storage;
            const bool ok = shared ? is_shared(s) && is_shared(d) : s == Storage::local && d == Storage::local;
            if (ok) return "";
            return std::string("storage scope mismatch: dst ") + storage_name(d) + ", src " + storage_name(s) +
                   (shared ? "; expected ['shared*']" : "; expected ['local']");
          }};
}

namespace {

OperandStaging staged(int operand, const TileRef& ref, long long elements, bool load, bool store) {
  OperandStaging s;
  s.operand = operand;
  s.dtype = ref.dtype;
  s.elements = elements;
  s.load = load;
  s.store = store;
  return s;
}

}  // namespace

void stage_registers(Plan& plan, const TileLayout& src, const TileLayout& dst) {
  const OpCall& call = plan.call;
  OperandStaging in = staged(0, call.inputs[0], call.inputs[0].elements(), true, false);
  in.place = place_in_registers(src, call.scope, "layout");
  OperandStaging out = staged(-1, call.output, call.output.elements(), call.accum, true);
  out.place = place_in_registers(dst, call.scope, "out_layout");
  plan.staging = {in, out};
}

void stage_shared(Plan& plan, const TileLayout& src, const TileLayout& dst) {
  const OpCall& call = plan.call;
  OperandStaging in = staged(0, call.inputs[0], call.inputs[0].elements(), true, false);
  in.kind = Staging::shared;
  in.layout = src;
  OperandStaging out = staged(-1, call.output, call.output.elements(), call.accum, true);
  out.kind = Staging::shared;
  out.layout = dst;
  plan.staging = {in, out};
}

void note_reduction_numerics(Plan& plan) {
  const ReductionOp& op = reduction_op(plan.call);
  const bool nan_form = plan.call.flag("propagate_nan");
  plan.note("accumulate_dtype", dtype_name(plan.call.inputs[0].dtype));
  plan.note("identity", nan_form ? op.identity_nan : op.identity);
  plan.note("nan", nan_form ? op.nan_nan : op.nan);
}

}  // namespace tp
