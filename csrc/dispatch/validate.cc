#include "dispatch/validate.h"

#include <algorithm>

#include "dispatch/architecture.h"
#include "errors.h"
#include "layout/placement.h"
#include "tileprim/config.cuh"

namespace tp {

namespace {

constexpr int kTreduceMaxDims = 5;

// A shared tile fits in a block's shared memory on the target (LimitError) and gives every
// element its own address.
void check_shared_addresses(const TileLayout& L, DType dtype, const std::string& arg, const DispatchContext& ctx) {
  const long long span = L.span(), limit = target_limits(ctx.target).shared_per_block;
  if (span > limit / dtype_size(dtype)) {
    throw LimitError(arg + ": " + L.str() + " spans " + std::to_string(span) + " elements of shared memory (" +
                     std::to_string(span) + " x " + std::to_string(dtype_size(dtype)) +
                     " bytes); a shared tile must fit in " + shared_bytes_str(limit));
  }
  const MemLayout mem = L.memory_layout();
  std::vector<long long> owner(static_cast<size_t>(span), -1);
  for (long long e = 0; e < L.size(); ++e) {
    const long long at = memory_offset(mem, e);
    if (owner[at] >= 0) {
      throw ValueError(arg + ": " + L.str() + " puts elements " + std::to_string(owner[at]) + " and " +
                       std::to_string(e) + " at shared offset " + std::to_string(at) +
                       "; each element of a shared tile needs its own address");
    }
    owner[at] = e;
  }
}

// `placed`: the register layouts already checked in this call; operands share one, mostly.
void check_layout(const TileRef& t, const ExecScope& scope, const std::string& arg, std::vector<TileLayout>& placed,
                  const DispatchContext& ctx) {
  if (!t.layout) return;
  const TileLayout& L = *t.layout;
  if (!L.padded()) {
    L.group(t.shape);  // the layout must place exactly this shape
  } else if (L.elements() != t.elements()) {  // a padded one its elements, flat (maps and copies
    // index them so; a reduction's variant groups them into dims where the padding allows)
    throw ValueError(arg + ": " + L.str() + " places " + std::to_string(L.elements()) + " elements but the tile shape " +
                     shape_str(t.shape) + " has " + std::to_string(t.elements()));
  }
  if (t.storage == Storage::local) {
    if (std::find(placed.begin(), placed.end(), L) == placed.end()) {
      place_in_registers(L, scope, arg);
      placed.push_back(L);
    }
    return;
  }
  if (L.has_thread_axes()) {
    throw ValueError(arg + ": " + L.str() + " uses thread axes, but a " + storage_name(t.storage) +
                     " tile is addressed by m only");
  }
  if (!L.replica().empty()) {
    throw ValueError(arg + ": " + L.str() + " has replicas; a " + std::string(storage_name(t.storage)) +
                     " tile holds each element once");
  }
  if (L.padded()) {
    throw ValueError(arg + ": " + L.str() + " is padded; a " + std::string(storage_name(t.storage)) +
                     " tile has no slots past its elements (only a register tile is padded over its threads)");
  }
  if (t.storage != Storage::global) check_shared_addresses(L, t.dtype, arg, ctx);  // global: read where it lies
}

// A copy inside a program may broadcast its source to a larger shape, as NumPy would.
void check_broadcast(const TileRef& src, const std::vector<long long>& shape) {
  bool ok = src.shape.size() <= shape.size();
  for (size_t i = 0; ok && i < src.shape.size(); ++i) {
    const long long s = src.shape[src.shape.size() - 1 - i], d = shape[shape.size() - 1 - i];
    ok = s == d || s == 1;
  }
  if (!ok) {
    throw ValueError(src.arg + ": shape " + shape_str(src.shape) + " does not broadcast to the copy's shape " +
                     shape_str(shape));
  }
}

void normalise_axes(OpCall& call) {
  const int rank = static_cast<int>(call.inputs.at(0).shape.size());
  if (call.axes.empty()) throw ValueError("axes: reduce at least one axis");
  std::vector<int> out;
  for (int a : call.axes) {
    if (a < -rank || a >= rank) {
      throw ValueError("axes: axis " + std::to_string(a) + " is out of range for a tile of rank " +
                       std::to_string(rank));
    }
    const int n = a < 0 ? a + rank : a;
    if (std::find(out.begin(), out.end(), n) != out.end()) {
      throw ValueError("axes: axis " + std::to_string(a) + " is repeated");
    }
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  call.axes = out;
}

// **config: only the switches the op reads, each True or False.
void check_options(const OpCall& call) {
  const OpDef& def = *call.def;
  for (const auto& [key, value] : call.config) {
    if (!def.has_option(key)) {
      std::string takes;
      for (const std::string& o : def.options) takes += (takes.empty() ? "" : ", ") + o;
      throw TypeError("unexpected keyword argument '" + key + "': " + def.name +
                      (takes.empty() ? " takes no variant options" : " takes the variant options " + takes));
    }
    call.flag(key);  // TypeError unless a bool
  }
}

// treduce: what PTO leaves undefined is checked here, before anything runs.
void validate_collective(const OpCall& call) {
  const std::vector<TileRef>& ranks = call.inputs;
  if (ranks.empty()) throw ValueError("tensors: a group needs at least one rank's tensor");
  if (ranks.size() > static_cast<size_t>(kMaxGroupSize)) {
    throw ValueError("tensors: " + std::to_string(ranks.size()) + " ranks; a group has at most " +
                     std::to_string(kMaxGroupSize));
  }
  if (!call.treduce) throw ValueError("treduce: the call carries no TreduceOptions");
  const TreduceOptions& options = *call.treduce;
  const long long root = options.root;
  if (root < 0 || root >= static_cast<long long>(ranks.size())) {
    throw ValueError("root: " + std::to_string(root) + " is not a rank of this group of " +
                     std::to_string(ranks.size()) + " (0 .. " + std::to_string(ranks.size() - 1) + ")");
  }
  const TileRef& first = ranks[0];
  if (first.shape.empty() || first.shape.size() > static_cast<size_t>(kTreduceMaxDims)) {
    throw ValueError("tensors: rank 0's tensor has " + std::to_string(first.shape.size()) +
                     " dims; treduce takes 1 to 5 (rows = dim -2, cols = dim -1, outer dims looped)");
  }
  if (!call.def->takes(first.dtype)) {
    throw TypeError("tensors: dtype " + std::string(dtype_name(first.dtype)) +
                    " is not supported; treduce takes float32, float16, bfloat16 or int32");
  }
  for (size_t r = 1; r < ranks.size(); ++r) {
    const TileRef& t = ranks[r];
    const std::string who = "tensors[" + std::to_string(r) + "]";
    if (t.shape != first.shape) {
      throw ValueError(who + ": shape " + shape_str(t.shape) + " differs from tensors[0]'s " + shape_str(first.shape) +
                       "; every rank's tensor has one shape");
    }
    if (t.dtype != first.dtype) {
      throw TypeError(who + ": dtype " + std::string(dtype_name(t.dtype)) + " differs from tensors[0]'s " +
                      dtype_name(first.dtype) + "; every rank's tensor has one dtype");
    }
    if (t.strides != first.strides) {
      throw ValueError(who + ": strides " + shape_str(t.strides) + " differ from tensors[0]'s " +
                       shape_str(first.strides) + "; every rank's tensor has the same strides");
    }
  }
  const TileRef& dst = call.output;
  if (dst.shape != first.shape) {
    throw ValueError("dst: shape " + shape_str(dst.shape) + " differs from the ranks' " + shape_str(first.shape));
  }
  if (dst.dtype != first.dtype) {
    throw TypeError("dst: dtype " + std::string(dtype_name(dst.dtype)) + " differs from the ranks' " +
                    dtype_name(first.dtype) + " (the result has the operands' dtype, also with accumulate=)");
  }
  if (dst.device != ranks[root].device) {
    throw ValueError("dst: is on " + (dst.device < 0 ? std::string("the host") : "GPU " + std::to_string(dst.device)) +
                     " but the root's tensor on " +
                     (ranks[root].device < 0 ? std::string("the host") : "GPU " + std::to_string(ranks[root].device)) +
                     "; dst lives with the root");
  }
  const std::string& op = options.op;
  const auto& table = op_table();
  if (std::none_of(table.begin(), table.end(), [&](const OpDef& d) { return d.name == op && d.reduction; })) {
    throw ValueError("op: '" + op + "' is not a treduce op; use " + reduction_op_names());
  }
  const long long rows = options.tile_rows, cols = options.tile_cols;
  if (rows < 1 || cols < 1) {
    throw ValueError("tile: (" + std::to_string(rows) + ", " + std::to_string(cols) +
                     ") needs rows and cols of at least 1");
  }
  const std::string& valid = options.valid;
  if (valid != "dynamic" && valid != "static") {
    throw ValueError("valid: '" + valid + "' is not 'dynamic' (a partial last chunk) or 'static' (divisible)");
  }
  const long long shape_rows = first.shape.size() >= 2 ? first.shape[first.shape.size() - 2] : 1;
  const long long shape_cols = first.shape.back();
  if (valid == "static" && (shape_rows % rows != 0 || shape_cols % cols != 0)) {
    throw ValueError("valid: 'static' needs the tile to divide the tensor: rows " + std::to_string(shape_rows) +
                     " % " + std::to_string(rows) + " = " + std::to_string(shape_rows % rows) + ", cols " +
                     std::to_string(shape_cols) + " % " + std::to_string(cols) + " = " +
                     std::to_string(shape_cols % cols) + "; use valid='dynamic' for a partial last chunk");
  }
  const std::string& accumulate = options.accumulate;
  if (!accumulate.empty() && (accumulate != "float32" || !is_16bit_float(first.dtype))) {
    throw ValueError("accumulate: '" + accumulate + "' is not allowed for " + dtype_name(first.dtype) +
                     "; accumulate='float32' is the opt-in for float16 and bfloat16 operands");
  }
}

// take_along_axis (x, idx) and scatter_add_along_axis (x, idx, src): arrays only, x of a float
// dtype, idx of an index type, src of x's; the shapes by gather_result_shape.
void validate_gather(OpCall& call, const DispatchContext& ctx) {
  const OpDef& def = *call.def;
  std::vector<std::vector<long long>> shapes;
  std::vector<TileLayout> placed;
  for (const TileRef& t : call.inputs) {
    if (t.scalar) throw TypeError(t.arg + ": " + def.name + " takes arrays, not a scalar");
    const bool index = t.arg == "idx";
    if (index ? !is_integer(t.dtype) : !def.takes(t.dtype)) {
      const char* takes = index ? " takes int32 or int64" : " takes float16, bfloat16, float32 or float64";
      throw TypeError(t.arg + ": dtype " + std::string(dtype_name(t.dtype)) + " is not supported by " + def.name +
                      "; " + t.arg + takes);
    }
    if (t.arg == "src" && t.dtype != call.inputs[0].dtype) {
      throw TypeError("src: dtype " + std::string(dtype_name(t.dtype)) + " differs from x's " +
                      dtype_name(call.inputs[0].dtype));
    }
    shapes.push_back(t.shape);
  }
  call.output.shape = gather_result_shape(def, shapes, call.axes);
  call.output.dtype = call.inputs[0].dtype;
  for (TileRef& t : call.inputs) {
    if (!t.layout) t.layout = TileLayout::row_major(t.shape);
    check_layout(t, call.scope, "layout (" + t.arg + ")", placed, ctx);
  }
  if (!call.output.layout) call.output.layout = TileLayout::row_major(call.output.shape);
  check_layout(call.output, call.scope, "out_layout", placed, ctx);
}

}  // namespace

std::vector<long long> gather_result_shape(const OpDef& def, const std::vector<std::vector<long long>>& shapes,
                                           std::vector<int>& axes) {
  if (static_cast<int>(shapes.size()) != def.arity()) {
    throw ValueError(def.name + ": takes " + std::to_string(def.arity()) + " operands, got " +
                     std::to_string(shapes.size()));
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string& arg = def.operands[i];
    if (shapes[i].empty()) throw ValueError(arg + ": a 0-d array holds one value, not a tile; reshape it to (1,)");
    if (shapes[i].size() > static_cast<size_t>(kMaxRank)) {
      throw ValueError(arg + ": tiles have at most " + std::to_string(kMaxRank) + " dims");
    }
    for (long long d : shapes[i]) {
      if (d < 1) throw ValueError(arg + ": tile dims must be at least 1 (shape has " + std::to_string(d) + ")");
    }
  }
  const std::vector<long long>&x = shapes[0], &idx = shapes[1];
  const int rank = static_cast<int>(x.size());
  if (axes.size() != 1) throw ValueError("axis: " + def.name + " takes one axis");
  if (axes[0] < -rank || axes[0] >= rank) {
    throw ValueError("axis: axis " + std::to_string(axes[0]) + " is out of range for a tile of rank " +
                     std::to_string(rank));
  }
  if (axes[0] < 0) axes[0] += rank;
  bool fits = idx.size() == x.size();
  for (int d = 0; fits && d < rank; ++d) fits = d == axes[0] || idx[d] == x[d];
  if (!fits) {
    throw ValueError("idx: shape " + shape_str(idx) + " does not fit x's " + shape_str(x) + " along axis " +
                     std::to_string(axes[0]) + ": the same rank, and the same extent in every other dim");
  }
  if (shapes.size() > 2 && shapes[2] != idx) {
    throw ValueError("src: shape " + shape_str(shapes[2]) + " differs from idx's " + shape_str(idx));
  }
  return def.name == "take_along_axis" ? idx : x;
}

// A cluster scope: a target with clusters, and every tile in registers (each CTA of the cluster has
// its own shared memory; the lanes exchange values through the cluster's shared memory themselves).
// A gather's x in global memory is no tile the cluster holds: gather_global reads a program's input
// where it lies, each thread its own picks (cross-entropy's logit at its label, beside a row the
// cluster holds in registers).
void check_cluster(const OpCall& call, const DispatchContext& ctx) {
  if (call.scope.kind != ScopeKind::cluster) return;
  check_cluster_target(call.scope.ctas, ctx.target);
  std::vector<const TileRef*> tiles = {&call.output};
  for (const TileRef& t : call.inputs) tiles.push_back(&t);
  for (const TileRef* t : tiles) {
    const bool read_where_it_lies =
        call.def->family == OpFamily::gather && t == &call.inputs.at(0) && t->storage == Storage::global;
    if (!t->scalar && t->storage != Storage::local && !read_where_it_lies) {
      throw ValueError("storage: a cluster's tiles live in registers (each CTA has its own shared memory), not " +
                       std::string(storage_name(t->storage)) + "; use storage='local' or a cta scope");
    }
  }
}

void validate_call(OpCall& call, const DispatchContext& ctx) {
  const OpDef& def = *call.def;
  if (def.family == OpFamily::collective) return validate_collective(call);
  check_cluster(call, ctx);
  if (def.family == OpFamily::gather) {
    check_options(call);
    return validate_gather(call, ctx);
  }
  if (static_cast<int>(call.inputs.size()) != def.arity()) {
    throw ValueError(def.name + ": takes " + std::to_string(def.arity()) + " operands, got " +
                     std::to_string(call.inputs.size()));
  }
  check_options(call);
  std::vector<TileLayout> placed;
  const TileRef* first_array = nullptr;
  for (const TileRef& t : call.inputs) {
    if (!t.scalar && !first_array) first_array = &t;
  }
  if (!first_array) throw ValueError(def.name + ": at least one operand must be an array (all are scalars)");
  if (def.name == "fill" && !call.inputs[1].scalar) throw TypeError("value: fill takes a Python scalar value");
  for (const TileRef& t : call.inputs) {
    if (t.scalar) continue;
    if (t.shape.empty()) {
      throw ValueError(t.arg + ": a 0-d array holds one value, not a tile; reshape it to (1,) (e.g. " + t.arg +
                       ".reshape(1))");
    }
    if (t.shape.size() > static_cast<size_t>(kMaxRank)) {
      throw ValueError(t.arg + ": tiles have at most " + std::to_string(kMaxRank) + " dims");
    }
    for (long long d : t.shape) {
      if (d < 1) throw ValueError(t.arg + ": tile dims must be at least 1 (shape has " + std::to_string(d) + ")");
    }
    if (!def.takes(t.dtype)) {
      std::string takes;
      for (DType d : def.dtypes) takes += (takes.empty() ? "" : ", ") + std::string(dtype_name(d));
      const char* hint = is_integer(t.dtype) ? " (tp.cast takes an index tile to a float dtype)" : "";
      throw TypeError(t.arg + ": dtype " + std::string(dtype_name(t.dtype)) + " is not supported by " + def.name +
                      ", which takes " + takes + hint);
    }
    if (def.name != "cast" && t.dtype != first_array->dtype) {
      throw TypeError(t.arg + ": dtype " + std::string(dtype_name(t.dtype)) + " differs from " + first_array->arg +
                      "'s " + dtype_name(first_array->dtype) + "; operands of " + def.name +
                      " need one dtype (use tp.cast)");
    }
    if (t.shape != first_array->shape) {
      throw ValueError(t.arg + ": shape " + shape_str(t.shape) + " differs from " + first_array->arg + "'s " +
                       shape_str(first_array->shape));
    }
    check_layout(t, call.scope, t.arg == "src" ? "layout" : "layout (" + t.arg + ")", placed, ctx);
    if (is_shared(t.storage) && !t.layout) check_shared_addresses(TileLayout::row_major(t.shape), t.dtype, t.arg, ctx);
  }
  if (def.family == OpFamily::reduction) {
    normalise_axes(call);
    call.output.shape.clear();  // the src dims not reduced (the variant may keep more)
    for (size_t d = 0; d < first_array->shape.size(); ++d) {
      if (!std::binary_search(call.axes.begin(), call.axes.end(), static_cast<int>(d))) {
        call.output.shape.push_back(first_array->shape[d]);
      }
    }
  } else {
    const bool broadcast = def.name == "copy" && !call.output.shape.empty() && call.output.shape != first_array->shape;
    if (broadcast) {
      check_broadcast(*first_array, call.output.shape);
    } else {
      call.output.shape = first_array->shape;
    }
    if (def.name != "cast") call.output.dtype = first_array->dtype;
    if (def.name == "cast" && is_integer(call.output.dtype)) {
      throw TypeError("dtype: cast makes float16, bfloat16, float32 or float64, not " +
                      std::string(dtype_name(call.output.dtype)));
    }
    // the output's layout named, else the operands' (a refusal then names the operand's layout)
    const char* named = call.output.layout ? "out_layout" : "layout";
    if (!call.output.layout && !broadcast) call.output.layout = first_array->layout;
    if (!call.output.layout) call.output.layout = TileLayout::row_major(call.output.shape);
    for (TileRef& t : call.inputs) {
      if (!t.scalar && !t.layout) t.layout = TileLayout::row_major(t.shape);
    }
    check_layout(call.output, call.scope, named, placed, ctx);
  }
  if (call.output.layout && call.output.layout->has_thread_axes() && call.output.storage != Storage::local) {
    throw ValueError("out_layout: " + call.output.layout->str() + " uses thread axes, but a " +
                     storage_name(call.output.storage) + " tile is addressed by m only");
  }
  if (call.output.layout && call.output.storage == Storage::local && def.family == OpFamily::reduction) {
    place_in_registers(*call.output.layout, call.scope, "out_layout");  // elementwise: check_layout did
  }
  if (call.output.layout && is_shared(call.output.storage)) {
    check_shared_addresses(*call.output.layout, call.output.dtype, "out_layout", ctx);
  }
  if (call.accum && def.family != OpFamily::reduction) {
    throw ValueError("accum: only reductions accumulate into their output");
  }
}

}  // namespace tp
