// reduction -> local (priority 10): source and destination in registers.
//   thread scope:          each thread folds its own registers (the thread-wise loop).
//   cta scope:             the same, where the tile is spread over the threads and each holds
//                          its reduced dims whole (no exchange: a column sum of rows).
//   warp / warpgroup:      each lane folds its registers, then an XOR butterfly folds across
//                          the lanes holding parts of one output: always when the output is
//                          replicated on those lanes (R[32 : 1@laneid], "warp_shuffle"), and
//                          with thread_reduce=True when the output keeps them as a dim ("view").
// Unlike the reference, the shuffle path honours axes and accum (old value folded in once),
// and warpgroup may shuffle too as long as the reduced lanes stay within one warp.
//
// reduction -> cross_warp (priority 5): the same algorithm at CTA scope (where local declines)
// and at warpgroup scope where the butterfly crosses warps (reduced lanes spanning up to 1024
// threads; a cluster's, up to its ctas * threads): lane masks past 31 exchange through shared memory
// between the instance's barriers (past a CTA's threads, through the cluster's distributed shared
// memory between cluster barriers). A row over a CTA of whole warps no power of two (96, 192, ...
// threads) folds within each warp by the butterfly, then the warps' results in order (ShuffleMasks::warps).
// The fold order is local's, so
// the CPU backend runs it with the same lane group. Not in the reference, which has no register
// reduction at CTA scope; tile programs use it to keep a row in registers.
#include <algorithm>
#include <memory>

#include "dispatch/registry.h"
#include "errors.h"
#include "layout/placement.h"
#include "variants/reduction/reduction_common.h"

namespace tp {
namespace {

// What the analysis of a call finds: the path, both layouts, the fold and the lane masks.
struct LocalAnalysis {
  std::string path;  // thread_wise | warp_shuffle | view
  TileLayout src_layout = TileLayout::row_major({1});
  TileLayout dst_layout = TileLayout::row_major({1});
  std::vector<long long> dst_shape;
  FoldView view{};
  ShuffleMasks masks{0, {}, 32};
};

bool lane_level(Axis a) { return a == Axis::laneid || a == Axis::tid_in_wg || a == Axis::tx; }
bool power_of_two(long long x) { return x > 0 && (x & (x - 1)) == 0; }
int log2_exact(long long x) {
  int b = 0;
  while ((1ll << b) < x) ++b;
  return b;
}

// Memory iters get compact row-major strides, thread iters stay: the derived destinations.
TileLayout compact(std::vector<Iter> shard, std::vector<Iter> replica, std::map<Axis, long long> offset) {
  long long stride = 1;
  for (auto it = shard.rbegin(); it != shard.rend(); ++it) {
    if (!is_thread_axis(it->axis)) {
      it->stride = stride;
      stride *= it->extent;
    }
  }
  if (shard.empty()) shard.push_back(Iter{1, 1, Axis::m});
  offset.erase(Axis::m);
  return TileLayout(shard, replica, offset);
}

// A dim's iters with adjacent memory iters merged: two layouts with equal segments put
// each element on the same thread and in the same per-thread order.
std::vector<Iter> segments(const DimIters& dim) {
  std::vector<Iter> out;
  for (const Iter& it : dim.iters) {
    if (it.extent == 1) continue;
    if (!is_thread_axis(it.axis) && !out.empty() && !is_thread_axis(out.back().axis)) {
      out.back().extent *= it.extent;
    } else {
      out.push_back(is_thread_axis(it.axis) ? it : Iter{it.extent, 0, Axis::m});
    }
  }
  return out;
}

std::map<Axis, long long> thread_offsets(const TileLayout& L) {
  std::map<Axis, long long> out;
  for (const auto& [axis, value] : L.offset()) {
    if (is_thread_axis(axis) && value != 0) out[axis] = value;
  }
  return out;
}

bool same_partition(const TileLayout& a, const TileLayout& b, const std::vector<long long>& shape) {
  std::vector<DimIters> da, db;
  try {
    da = a.group(shape);
    db = b.group(shape);
  } catch (const ValueError&) {
    return false;
  }
  for (size_t d = 0; d < da.size(); ++d) {
    if (!(segments(da[d]) == segments(db[d]))) return false;
  }
  auto sorted = [](std::vector<Iter> v) {
    std::sort(v.begin(), v.end(), [](const Iter& x, const Iter& y) {
      return std::tie(x.axis, x.stride, x.extent) < std::tie(y.axis, y.stride, y.extent);
    });
    return v;
  };
  return sorted(a.replica()) == sorted(b.replica()) && thread_offsets(a) == thread_offsets(b);
}

// The lane-xor masks that fold the reduced dims' thread iters; Decline when a shuffle
// cannot reach them. `cta_warps`: a CTA's lanes, which may fold warps in order (CtaLanes::fold_warps).
ShuffleMasks shuffle_masks(const TileLayout& src, const std::vector<DimIters>& dims,
                           const std::vector<bool>& reduced, int cross_warp_threads, bool cta_warps) {
  ShuffleMasks sh{0, {}, 32};
  std::vector<int> masks;  // distinct bits of 32 lanes: at most 5
  long long reduced_bits = 0, spatial_bits = 0;
  for (size_t d = 0; d < dims.size(); ++d) {
    for (const Iter& it : dims[d].iters) {
      if (!is_thread_axis(it.axis) || it.extent == 1) continue;
      if (!lane_level(it.axis)) {
        if (reduced[d]) {
          throw Decline(std::string("reduced dim ") + std::to_string(d) + " is spread over warps (" +
                        axis_name(it.axis) + "); a shuffle reduces within one warp");
        }
        continue;
      }
      // a row over a whole CTA of warps no power of two: the butterfly within each warp, then the warps'
      // partials in order (ShuffleMasks::warps)
      const bool warps_in_order = reduced[d] && cta_warps && it.axis == Axis::tx && it.stride == 1 &&
                                  it.extent == cross_warp_threads && it.extent % 32 == 0 && !power_of_two(it.extent);
      if (warps_in_order) {
        if (reduced_bits) throw Decline("a row over warps no power of two folds no other thread iter");
        reduced_bits = ~0ll;
        sh.warps = static_cast<int>(it.extent / 32);
        for (int m = 1; m < 32; m *= 2) masks.push_back(m);
        continue;
      }
      if (!power_of_two(it.stride) || (reduced[d] && !power_of_two(it.extent))) {
        throw Decline(std::string("thread iter ") + std::to_string(it.extent) + " : " + std::to_string(it.stride) +
                      "@" + axis_name(it.axis) + " is not a power of two; an XOR butterfly needs one");
      }
      const long long bits = ((1ll << log2_exact(it.extent)) - 1) * it.stride;
      if (reduced[d]) {
        if (it.stride * it.extent > std::max(32, cross_warp_threads)) {
          throw Decline(std::string("reduced dim ") + std::to_string(d) + " spans " +
                        std::to_string(it.stride * it.extent) + " threads on " + axis_name(it.axis) +
                        (cross_warp_threads ? "; the scope has " + std::to_string(cross_warp_threads)
                                            : std::string("; a shuffle reduces within one warp")));
        }
        if (reduced_bits & bits) throw Decline("reduced thread iters share lane bits");
        reduced_bits |= bits;
        for (long long m = it.stride; m < it.stride * it.extent; m *= 2) masks.push_back(static_cast<int>(m));
      } else {
        spatial_bits |= bits;
      }
    }
  }
  if (reduced_bits & spatial_bits) throw Decline("spatial and reduced thread iters share lane bits");
  std::sort(masks.begin(), masks.end());
  std::copy(masks.begin(), masks.end(), sh.mask);
  sh.count = static_cast<int>(masks.size());
  if (sh.count && sh.mask[sh.count - 1] >= 32) sh.width = cross_warp_threads;
  if (sh.count) {
    long long lane_offset = 0;
    for (const auto& [axis, value] : src.offset()) {
      if (lane_level(axis)) lane_offset += value;
    }
    const long long block = 2ll * sh.mask[sh.count - 1];
    if (lane_offset % block != 0) {
      throw Decline("the thread offset " + std::to_string(lane_offset) + " is not a multiple of " +
                    std::to_string(block) + ", so butterfly partners would leave the tile's lanes");
    }
  }
  return sh;
}

// cross_warp: the butterfly may cross warps (cross_warp); else it stays within one.
LocalAnalysis analyze(const OpCall& call, bool cross_warp) {
  const TileRef& src = call.inputs.at(0);
  const TileRef& dst = call.output;
  if (src.dtype != dst.dtype) {
    throw Decline(std::string("dtype mismatch: dst ") + dtype_name(dst.dtype) + ", src " + dtype_name(src.dtype));
  }
  const ReductionAxes ax = reduction_axes(call);
  LocalAnalysis a;
  a.src_layout = src.layout.value_or(TileLayout::row_major(src.shape));
  const ScopeKind kind = call.scope.kind;
  const auto src_dims = a.src_layout.group(src.shape);
  // at CTA scope local takes a tile spread over the threads whose reduced dims each thread holds
  // whole (a sum down the columns of rows): the threads fold their registers and exchange nothing
  const bool spread =
      std::any_of(src_dims.begin(), src_dims.end(), [](const DimIters& d) { return d.thread_extent > 1; });
  if (!cross_warp && call.scope.whole_blocks() && (kind != ScopeKind::cta || !spread)) {
    throw Decline("unsupported exec_scope " + call.scope.kind_name() + " for local reduction");
  }
  if (cross_warp && !call.scope.whole_blocks() && kind != ScopeKind::warpgroup) {
    throw Decline("exec_scope " + call.scope.str() +
                  ": the butterfly crosses warps only at warpgroup, cta or cluster scope");
  }
  if (cross_warp && kind == ScopeKind::cluster && !power_of_two(call.scope.cta_threads())) {
    throw Decline("a cluster of " + std::to_string(call.scope.cta_threads()) +
                  "-thread CTAs: butterfly partners lie whole CTAs apart only where a CTA's threads are a power of two");
  }
  if (cross_warp && call.scope.threads % 32 != 0) {
    throw Decline("a cta of " + std::to_string(call.scope.threads) + " threads is not whole warps");
  }

  if (kind == ScopeKind::thread) {
    a.path = "thread_wise";
    a.dst_shape = ax.dst_shape;
    a.dst_layout = dst.layout.value_or(TileLayout::row_major(ax.dst_shape));
  } else {
    if (a.src_layout.swizzled() || (dst.layout && dst.layout->swizzled())) {
      throw Decline("swizzle layout unsupported for local reduction");
    }
    if (!a.src_layout.replica().empty()) {
      throw Decline("src layout " + a.src_layout.str() + " has replicas; a reduction source holds each element once");
    }
    a.masks = shuffle_masks(a.src_layout, src_dims, ax.reduced, cross_warp ? call.scope.threads : 0,
                            cross_warp && kind == ScopeKind::cta);
    if (!cross_warp && kind == ScopeKind::cta && a.masks.count) {
      throw Decline("a reduced dim lies across the lanes of the cta: cross_warp folds it");
    }
    if (cross_warp && a.masks.count == 0) {
      throw Decline("no reduced dim lies across the scope's threads: a butterfly has nothing to fold");
    }
    if (cross_warp && kind == ScopeKind::warpgroup && a.masks.mask[a.masks.count - 1] < 32) {
      throw Decline("the reduced lanes stay within one warp: local folds them");
    }

    // the two destinations a lane-distributed source can reduce into
    std::vector<Iter> spatial, replica, kept;
    std::vector<long long> kept_shape;
    for (size_t d = 0; d < src_dims.size(); ++d) {
      const DimIters& dim = src_dims[d];
      if (!ax.reduced[d]) {
        spatial.insert(spatial.end(), dim.iters.begin(), dim.iters.end());
        kept.insert(kept.end(), dim.iters.begin(), dim.iters.end());
        kept_shape.push_back(src.shape[d]);
        continue;
      }
      for (const Iter& it : dim.iters) {
        if (is_thread_axis(it.axis)) {
          replica.push_back(it);
          kept.push_back(it);
        }
      }
      if (dim.thread_extent > 1) kept_shape.push_back(dim.thread_extent);
    }
    if (kept_shape.empty()) kept_shape.push_back(1);
    long long kept_len = 1;
    for (long long d : kept_shape) kept_len *= d;
    const TileLayout replica_form = compact(spatial, replica, thread_offsets(a.src_layout));
    const TileLayout kept_form = compact(kept, {}, thread_offsets(a.src_layout));

    bool replicated = !replica.empty();
    if (!dst.layout) {
      a.dst_layout = replica_form;
      a.dst_shape = ax.dst_shape;
    } else if (dst.layout->size() == ax.spatial_len && same_partition(*dst.layout, replica_form, ax.dst_shape)) {
      a.dst_layout = *dst.layout;
      a.dst_shape = ax.dst_shape;
    } else if (dst.layout->size() == kept_len && kept_len != ax.spatial_len &&
               same_partition(*dst.layout, kept_form, kept_shape)) {
      a.dst_layout = *dst.layout;
      a.dst_shape = kept_shape;
      replicated = false;
    } else {
      std::string expect = replica_form.str();
      if (!(kept_form == replica_form)) expect += ", or keeping the reduced thread dims " + kept_form.str();
      throw Decline("out_layout " + dst.layout->str() + " does not hold the reduction of " +
                    a.src_layout.str() + "; expected " + expect + " (memory strides may differ)");
    }
    if (!replicated && !call.flag("thread_reduce")) a.masks.count = a.masks.warps = 0;
    a.path = replicated ? "warp_shuffle" : "view";
  }
  a.view = fold_view(a.src_layout, src_dims, ax.reduced, a.dst_layout, a.dst_layout.group(a.dst_shape));
  return a;
}

Analysis local_valid(const OpCall& call, const DispatchContext&) {
  if (call.inputs.at(0).storage != Storage::local) return nullptr;  // storage_scope already says why
  return std::make_shared<const LocalAnalysis>(analyze(call, false));
}

Analysis cross_warp_valid(const OpCall& call, const DispatchContext&) {
  if (call.inputs.at(0).storage != Storage::local) return nullptr;
  return std::make_shared<const LocalAnalysis>(analyze(call, true));
}

// One output per lane, folded from the lane's slots 0, 1, ... in turn (then across lanes): a
// frame may hand the lane its slots a run at a time and fold each run as it comes (a program's
// streamed rows) for the same bits.
bool lane_folds_in_slot_order(const LocalAnalysis& a) {
  if (a.path == "thread_wise" || a.view.spatial != 1) return false;
  for (int j = 0; j < a.view.reduce; ++j) {
    if (a.view.src_slot(0, j) != j) return false;
  }
  return true;
}

class LocalReduction : public Variant {
 public:
  explicit LocalReduction(bool cross_warp)
      : Variant(cross_warp ? "cross_warp" : "local", cross_warp ? 5 : 10, OpFamily::reduction,
                cross_warp ? std::vector<Predicate>{storage_predicate(false), analysing("cross_warp_valid", cross_warp_valid)}
                           : std::vector<Predicate>{storage_predicate(false), analysing("local_valid", local_valid)}),
        cross_warp_(cross_warp) {}

  void plan(Plan& plan) const override {
    const LocalAnalysis* found = plan.analysis_as<LocalAnalysis>();
    const LocalAnalysis a = found ? *found : analyze(plan.call, cross_warp_);  // a caller that skipped the predicates
    const ReductionAxes ax = reduction_axes(plan.call);
    plan.call.output.layout = a.dst_layout;
    plan.call.output.shape = a.dst_shape;
    plan.set("path", a.path);
    plan.set("spatial_len", ax.spatial_len);
    plan.set("reduction_len", ax.reduce_len);
    plan.set("outputs_per_thread", static_cast<long long>(a.view.spatial));
    plan.set("sources_per_output", static_cast<long long>(a.view.reduce));
    plan.set("shuffle_masks", std::vector<long long>(a.masks.mask, a.masks.mask + a.masks.count));
    plan.set("n_shuffles", static_cast<long long>(a.masks.count));
    if (a.masks.warps > 1) plan.set("warps_folded_in_order", static_cast<long long>(a.masks.warps));
    plan.set("lane_folds_in_slot_order", lane_folds_in_slot_order(a));
    note_reduction_numerics(plan);
    plan.note("order", a.masks.count
                           ? "each lane folds its registers in order from the identity, then XOR butterfly over "
                             "lane masks in the order listed" +
                             std::string(!cross_warp_ ? ""
                                         : plan.call.scope.kind == ScopeKind::cluster
                                             ? " (masks past 31 through shared memory; from a CTA's threads on, "
                                               "through the cluster's distributed shared memory)"
                                             : " (masks past 31 through shared memory)") +
                             (a.masks.warps > 1 ? ", then the " + std::to_string(a.masks.warps) +
                                                      " warps' results folded in order, warp 0's first (through "
                                                      "shared memory: no butterfly spans warps no power of two)"
                                                : std::string()) +
                             "; accum: op(old, result)"
                           : "each thread folds its registers in order, starting from the identity (accum: from "
                             "the old value)");
    plan.note("ftz", "no: subnormals kept");
    stage_registers(plan, a.src_layout, a.dst_layout);
    auto detail = std::make_shared<LocalPlan>();
    detail->thread_wise = a.path == "thread_wise";
    detail->view = a.view;
    detail->masks = a.masks;
    plan.detail = detail;
  }

 private:
  bool cross_warp_;
};

}  // namespace

void register_reduction_local(Registry& r) { r.add(std::make_unique<LocalReduction>(false)); }
void register_reduction_cross_warp(Registry& r) { r.add(std::make_unique<LocalReduction>(true)); }

}  // namespace tp
