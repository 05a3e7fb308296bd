// The CUDA executors of the tile variants: each is the variant's kernel body, the
// declarations of its descriptors and one call of its device template (the same template the
// CPU executor runs with HostLanes); the kernel frame does the rest.
#include "backends/cuda/executors.h"

#include <sstream>

#include "backends/cuda/tile_executor.h"
#include "backends/cuda/treduce_executor.h"
#include "errors.h"
#include "variants/gather/gather_plan.h"
#include "variants/reduction/reduction_common.h"

namespace tp::cuda {

namespace {

std::string view_decl(const FoldView& v, const char* unroll) {
  std::ostringstream os;
  os << "constexpr tp::ReduceView<" << unroll << "> kView = {" << v.spatial << ", " << v.reduce << ",\n    "
     << cuda_mem_layout(v.src) << ",\n    " << cuda_mem_layout(v.dst) << "};\n";
  return os.str();
}

std::string masks_decl(const ShuffleMasks& sh) {
  std::ostringstream os;
  os << "constexpr tp::ShuffleMasks kMasks = {" << sh.count << ", {";
  for (int i = 0; i < kMaxShuffleMasks; ++i) os << (i ? ", " : "") << sh.mask[i];
  os << "}, " << sh.width << ", " << sh.warps << "};\n";
  return os.str();
}

const char* accum_of(const Plan& plan) { return plan.call.accum ? "true" : "false"; }

// local and shared: a thread-wise plan folds each thread's own registers; the others call the
// variant's lane fold, `lane_fn<op>(lanes, lane_args..., accum)`.
KernelBody lane_body(const Plan& plan, bool thread_wise, std::string decls, const std::string& lane_fn,
                     const std::string& lane_args, const std::string& lanes = "tp::DeviceLanes{lane}") {
  const std::string op = reduce_functor(plan.call);
  KernelBody body{std::move(decls),
                  thread_wise ? "tp::thread_reduce<" + op + ">(out, in0, kView, " + accum_of(plan) + ");"
                              : lane_fn + "<" + op + ">(" + lanes + ", " + lane_args + accum_of(plan) + ");",
                  true};
  if (!thread_wise && lane_fn == "tp::lane_reduce") {
    body.fold_op = op;
    body.fold_lanes = lanes;
  }
  return body;
}

KernelBody local_body(const Plan& plan) {
  const auto& d = plan.detail_as<LocalPlan>();
  return lane_body(plan, d.thread_wise, view_decl(d.view, "tp::kUnrollRegisters") + masks_decl(d.masks),
                   "tp::lane_reduce", "out, 0, in0, 0, kView, kMasks, ");
}

// Every thread of the instance takes part in each cross-warp exchange (its barriers), so the
// frame must not split the call by per-thread conditions (runs read in place are not offered).
// A cluster's lanes exchange across its CTAs too (tp::ClusterLanes; the frame declares its counter).
KernelBody cross_warp_body(const Plan& plan) {
  const auto& d = plan.detail_as<LocalPlan>();
  const bool cluster = plan.call.scope.kind == ScopeKind::cluster;
  KernelBody body = lane_body(plan, false, view_decl(d.view, "tp::kUnrollRegisters") + masks_decl(d.masks),
                              "tp::lane_reduce", "out, 0, in0, 0, kView, kMasks, ",
                              cluster ? "tp::ClusterLanes<kCtaThreads, kCtas>{{lane}, cluster_phase}"
                                      : "tp::CtaLanes<kThreads, kInstances>{{lane}, instance}");
  body.indexes_sources = false;
  body.syncs_instances = true;
  return body;
}

KernelBody shared_body(const Plan& plan) {
  const auto& d = plan.detail_as<SharedPlan>();
  std::ostringstream decls;
  decls << view_decl(d.view, "tp::kUnrollMemory") << masks_decl(d.groups.masks) << "constexpr tp::GroupShape kGroups = {"
        << d.groups.group_size << ", " << d.groups.groups << ", kMasks};\n";
  return lane_body(plan, d.thread_wise, decls.str(), "tp::shared_group_reduce", "out, in0, kView, kGroups, ");
}

KernelBody packed_body(const Plan& plan) {
  const auto& d = plan.detail_as<PackedPlan>();
  return {view_decl(d.view, "tp::kUnrollRegisters"),
          "tp::packed_fold<" + reduce_functor(plan.call) + ">::run(out, in0, kView, " + accum_of(plan) + ");", true};
}

// The op table's functor over this thread's bundle; scalar operands are kernel parameters. A
// softmax's division (a tile divided by its own sum) takes fdiv's functor that knows so.
KernelBody map_body(const Plan& plan) {
  const OpCall& call = plan.call;
  const std::string& fn = call.def->functor(call.flag("propagate_nan"), call.flag("fastmath"), call.output.dtype,
                                            call.numerator_part_of_divisor);
  std::ostringstream os;
  os << "tp::map_tile<" << fn << ", tp::kUnrollRegisters>(tp::DeviceLanes{lane}, out, 0, kBodySlots";
  for (int i : call.def->mapped) {
    const TileRef& r = call.inputs[i];
    const char* T = dtype_cuda_name(r.scalar ? call.output.dtype : r.dtype);
    if (r.scalar) {
      os << ", tp::ScalarOperand<" << T << ">{tp::cast<" << T << ">(s" << i << ")}";
    } else {
      os << ", tp::operand(in" << i << ")";
    }
  }
  os << ");";
  return KernelBody{"", os.str(), false, true};
}

// gather -> gather: the tiles' shapes and memory layouts (and the wide side's register placement,
// where it has one), then the template on the staged tiles (scatter reads idx and src: in1, in2).
KernelBody gather_body(const Plan& plan) {
  const auto& d = plan.detail_as<GatherPlan>();
  const GatherView& v = d.view;
  std::ostringstream decls, call;
  decls << "constexpr tp::GatherView kGather = {" << v.outer << ", " << v.extent << ", " << v.picks << ", " << v.inner
        << ",\n    " << cuda_mem_layout(v.x) << ",\n    " << cuda_mem_layout(v.idx) << ",\n    "
        << cuda_mem_layout(v.src) << ",\n    " << cuda_mem_layout(v.out) << "};\n";
  if (d.held) {
    decls << cuda_place_type("PHeld", *d.held) << "constexpr int kHeldSlots = " << d.held->slots << ";\n";
  }
  const std::string lanes = "tp::DeviceLanes{lane}";
  if (d.held_picks) {
    call << "tp::scatter_one_held<tp::kUnrollRegisters>(" << lanes << ", PHeld{}, kHeldSlots, out, 0, in1, 0, in2, 0, "
         << v.extent << ");";
  } else if (d.scatter && d.held) {
    call << "tp::scatter_add_along_axis<tp::kUnrollRegisters>(" << lanes << ", PHeld{}, kHeldSlots, out, 0, in1, in2, "
         << "kGather);";
  } else if (d.scatter) {
    call << "tp::scatter_add_along_axis(" << lanes << ", kThreads, out, in1, in2, kGather);";
  } else if (d.global_source) {  // in0: the program frame's pointer to this tile of its input
    call << "tp::take_along_axis_global<tp::kUnrollRegisters>(" << lanes << ", out, 0, in0, in1, 0, "
         << v.outer * v.picks * v.inner << ", kGather);";
  } else if (d.held) {
    call << "tp::take_along_axis<tp::kUnrollRegisters>(" << lanes << ", PHeld{}, kThreads, kHeldSlots, out, in0, 0, "
         << "in1, kGather);";
  } else {
    call << "tp::take_along_axis(" << lanes << ", kThreads, out, in0, in1, kGather);";
  }
  return KernelBody{decls.str(), call.str(), false};
}

}  // namespace

void register_cuda_executors(ExecutorTable& table) {
  table.add("stage", "cuda", std::make_unique<CudaTileExecutor>(nullptr));  // the program frame writes copies
  table.add("local", "cuda", std::make_unique<CudaTileExecutor>(local_body));
  table.add("cross_warp", "cuda", std::make_unique<CudaTileExecutor>(cross_warp_body));
  table.add("shared", "cuda", std::make_unique<CudaTileExecutor>(shared_body));
  table.add("sm100_packed", "cuda", std::make_unique<CudaTileExecutor>(packed_body));
  table.add("reg", "cuda", std::make_unique<CudaTileExecutor>(map_body));
  table.add("gather", "cuda", std::make_unique<CudaTileExecutor>(gather_body));
  table.add("gather_global", "cuda", std::make_unique<CudaTileExecutor>(gather_body));
  table.add("scatter_held", "cuda", std::make_unique<CudaTileExecutor>(gather_body));
  register_cuda_treduce(table);
}

}  // namespace tp::cuda
