#include "backends/cuda/program_frame.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "backends/cuda/estimated_chain.h"
#include "backends/cuda/tile_executor.h"
#include "errors.h"
#include "layout/placement.h"
#include "program/scope_cost.h"

namespace tp {

namespace {

long long align16(long long bytes) { return (bytes + 15) / 16 * 16; }

long long elements_of(const ProgramValue& v) { return v.elements(); }

// The copy reads its source from a scratch area: a register source is spilled there whenever
// the result is not a shared tile of the same shape (another thread may hold what this one
// needs).
bool spills(const ProgramPlan& plan, const ProgramStep& step) {
  if (step.op != "copy") return false;
  const ProgramValue& src = plan.values.at(step.operands[0]);
  const ProgramValue& dst = plan.values.at(step.result);
  return src.in_registers() && !src.held_by_every_lane(plan.scope) && (dst.in_registers() || src.shape != dst.shape);
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

// Kernel parameter names: in<i> for input i; out for the first output, out<j> for the others.
std::string input_name(int i) { return "in" + std::to_string(i); }
// The call's run-time scalar k (ProgramPlan::scalar_args): a double parameter.
std::string scalar_name(int k) { return "a" + std::to_string(k); }
std::string output_name(size_t j) { return j == 0 ? "out" : "out" + std::to_string(j); }

// A row of a program that runs in passes (ProgramPlan::rows): the body moves it itself, but for
// each instance's row inputs under the shared staging, which the frame stages in shared memory.
bool chunked_row(const ProgramPlan& plan, const ProgramValue& v) { return plan.rows && v.shape == plan.rows->shape; }
bool staged_in_shared(const ProgramPlan& plan, const ProgramValue& v) {
  return plan.staging == "shared" && chunked_row(plan, v) && v.input >= 0 && !v.batch_broadcast;
}
// At a cluster, each CTA stages only its own threads' slots of such a row (its share), in the
// body's shared memory: the frame's staging would hold the whole row in every CTA.
bool staged_as_share(const ProgramPlan& plan, const ProgramValue& v) {
  return plan.scope.ctas > 1 && staged_in_shared(plan, v);
}

// Whether step s reads the values of its operand i as the frame stages it (zero and fill read
// only src's shape; gather_global reads its input where it lies: reads_global).
bool reads(const ProgramStep& s, size_t i) {
  if (s.op == "copy") return true;
  for (const OperandStaging& staged : s.bound->plan().staging) {
    if (staged.operand == static_cast<int>(i) && staged.load && staged.kind != Staging::global) return true;
  }
  return false;
}
bool reads_global(const ProgramStep& s, size_t i) {
  for (const OperandStaging& staged : s.bound->plan().staging) {
    if (staged.operand == static_cast<int>(i) && staged.kind == Staging::global) return true;
  }
  return false;
}
// Whether the kernel reads value `id`: a step reads it, or the program returns it (an input
// returned as it is is loaded to be copied out).
bool values_read(const ProgramPlan& plan, int id) {
  if (std::find(plan.outputs.begin(), plan.outputs.end(), id) != plan.outputs.end()) return true;
  for (const ProgramStep& s : plan.steps) {
    for (size_t i = 0; i < s.operands.size(); ++i) {
      if (s.operands[i] == id && reads(s, i)) return true;
    }
  }
  return false;
}

// Whether output j is summed over the block's tiles (ProgramPlan::folded)
bool folded(const ProgramPlan& plan, size_t j) {
  return std::find(plan.folded.begin(), plan.folded.end(), static_cast<int>(j)) != plan.folded.end();
}

// A program value as the frame stages it.
FrameOperand operand_of(const ProgramPlan& plan, const ProgramValue& v, int id, const std::string& name, bool output) {
  const ExecScope& scope = plan.scope;
  FrameOperand o;
  o.name = name;
  o.output = output;
  o.dtype = v.dtype;
  o.shape = v.shape;
  o.elements = v.elements();
  o.load = output ? v.accumulated : values_read(plan, id);
  o.store = output;
  o.batch_broadcast = v.batch_broadcast;
  if (!v.layout || (!output && !o.load)) return o;  // an input whose values nobody reads: a parameter only
  if (chunked_row(plan, v)) {
    if (staged_in_shared(plan, v) && !staged_as_share(plan, v)) {
      o.kind = Staging::shared;
      o.layout = TileLayout::row_major(v.shape);
    } else {
      o.moved_by_body = true;
    }
    return o;
  }
  if (v.in_registers()) {
    o.place = place_in_registers(*v.layout, scope, v.name);
  } else {
    o.kind = Staging::shared;
    o.layout = v.layout;
  }
  return o;
}

// The program's shared memory per instance: its tiles between steps by live range, then the
// scratch area where a copy moves register tiles between threads.
struct BodyMemory {
  long long tile_bytes = 0, scratch_bytes = 0;
  std::map<int, long long> shares;  // a cluster CTA's share of each row input (value id -> offset)
  long long share_bytes = 0;
  long long shares_at() const { return tile_bytes + scratch_bytes; }
  long long total() const { return tile_bytes + scratch_bytes + share_bytes; }
};
BodyMemory body_memory(const ProgramPlan& plan) {
  BodyMemory m;
  m.tile_bytes = align16(plan.shared_bytes);
  for (size_t i = 0; i < plan.values.size(); ++i) {
    if (!staged_as_share(plan, plan.values[i])) continue;
    m.shares[static_cast<int>(i)] = m.share_bytes;
    m.share_bytes += share_bytes(plan, *plan.rows, plan.values[i]);
  }
  for (const ProgramStep& s : plan.steps) {
    if (!spills(plan, s)) continue;
    const ProgramValue& src = plan.values.at(s.operands[0]);
    m.scratch_bytes = std::max(m.scratch_bytes, align16(src.elements() * dtype_size(src.dtype)));
  }
  return m;
}

// What the launch shape depends on, before the body's text: its shared memory and how it reads
// its operands. A body that is one call on the frame's operands (ProgramPlan::frame_stages_every_tile)
// reads them as that call does: a map's slots may come a chunk at a time, a run read by index
// where it lies.
KernelBody launch_body(const ProgramPlan& plan) {
  KernelBody body;
  body.shared_bytes = body_memory(plan).total();
  if (plan.frame_stages_every_tile() && plan.steps.front().op != "copy") {
    const KernelBody call = cuda::kernel_body(plan.steps.front().bound->plan());
    body.indexes_sources = call.indexes_sources;
    body.maps_slots = call.maps_slots;
  }
  return body;
}

// The body: each tile between steps declared (registers as an array, shared tiles at their
// live-range offset in the instance's `smem`), the inputs and outputs named as the frame stages
// them, then one block per step.
class ProgramBody {
 public:
  // launch: launch_body's flags, which the rendered body keeps (with maps_slots, the frame takes a
  // map's slots kBodySlots at a time and declares kBodySlots itself)
  ProgramBody(const ProgramPlan& plan, int instances, const KernelBody& launch)
      : plan_(plan), instances_(instances), memory_(body_memory(plan)), launch_(launch) {}

  KernelBody render() {
    if (plan_.rows) return passes();
    std::ostringstream decls, os;
    declare(decls, os);
    chains_ = estimated_chains(plan_);
    for (size_t k = 0; k < plan_.steps.size(); ++k) step(os, decls, k);
    copy_out(os);
    KernelBody body = launch_;
    body.decls = decls.str();
    body.call = os.str();
    body.syncs_instances = syncs_;
    if (!chains_.empty()) body.register_target = kChainRegisters;
    return body;
  }

 private:
  const ProgramValue& value(int id) const { return plan_.values.at(static_cast<size_t>(id)); }
  const char* type(int id) const { return dtype_cuda_name(value(id).dtype); }


  // The first output that is this value, where the frame's operand can hold it from the start
  // (an input returned as it is, or a value returned twice, is copied out at the end).
  int output_of(int id) const {
    if (value(id).input >= 0) return -1;
    const auto it = std::find(plan_.outputs.begin(), plan_.outputs.end(), id);
    return it == plan_.outputs.end() ? -1 : static_cast<int>(it - plan_.outputs.begin());
  }

  void declare(std::ostream& decls, std::ostream& os) {
    if (memory_.scratch_bytes > 0) os << "unsigned char* const scratch = smem + " << memory_.tile_bytes << ";\n";
    for (size_t i = 0; i < plan_.values.size(); ++i) {
      const ProgramValue& v = plan_.values[i];
      const int id = static_cast<int>(i);
      if (!v.layout || (v.input >= 0 && !values_read(plan_, id))) continue;
      const char* T = type(id);
      os << "// " << v.name << ": " << dtype_name(v.dtype) << shape_str(v.shape) << " " << v.placement() << "\n";
      const int out = output_of(id);
      const std::string staged = v.input >= 0 ? input_name(v.input) : out >= 0 ? output_name(out) : "";
      if (v.in_registers()) {
        if (!staged.empty()) {
          os << "auto& " << named("v", id) << " = " << staged << ";\n";
        } else {
          os << register_array(v.dtype, named("v", id), place_in_registers(*v.layout, plan_.scope, v.name)->slots) << ";\n";
        }
      } else {
        decls << "constexpr tp::MemLayout " << named("kMem", id) << " = " << cuda_mem_layout(v.layout->memory_layout())
              << ";\n";
        if (!staged.empty()) {
          os << T << "* const " << named("v", id) << " = " << staged << ";\n";
        } else {
          os << T << "* const " << named("v", id) << " = reinterpret_cast<" << T << "*>(smem + " << v.shared_offset
             << ");\n";
        }
      }
    }
  }

  void sync(std::ostream& os) {
    if (synced_ || plan_.scope.threads == 1) return;
    os << cuda_scope_sync(plan_.scope, instances_) << "\n";
    synced_ = syncs_ = true;
  }

  bool touches_shared(const ProgramStep& s) const {
    if (!value(s.result).in_registers()) return true;
    for (int id : s.operands) {
      if (id >= 0 && !value(id).in_registers()) return true;
    }
    return false;
  }

  void step(std::ostream& os, std::ostream& decls, size_t k) {
    const ProgramStep& s = plan_.steps[k];
    os << "// step " << k << ": " << value(s.result).name << " = " << s.op << " [" << s.bound->plan().variant << "]"
       << (s.where.empty() ? "" : " at " + s.where) << "\n";
    const bool own_registers = s.op == "copy" && value(s.operands[0]).held_by_every_lane(plan_.scope) &&
                               value(s.result).in_registers();
    if ((!s.sync_before.empty() && !own_registers) || touches_shared(s)) sync(os);
    if (const EstimatedChain* chain = chain_rounded_by(k)) {
      estimate_check(os, decls, *chain);  // the cast is the check's: each slot rounded as it is checked
    } else if (s.op == "copy") {
      copy(os, decls, s, k);
    } else {
      call(os, decls, s, k);
    }
    synced_ = false;
  }

  // One call of the step's device template, as its standalone kernel makes it, on this
  // program's tiles.
  void call(std::ostream& os, std::ostream& decls, const ProgramStep& s, size_t k) {
    KernelBody body = step_namespace(decls, s, k);
    const bool maps = s.bound->plan().call.def->family == OpFamily::elementwise;
    if (estimated(k)) body.call = fast_call(s);
    os << "{\n  using namespace tp_gen::step" << k << ";\n";
    for (size_t i = 0; i < s.operands.size(); ++i) {
      const int id = s.operands[i];
      if (scalar_operand(os, s, i, maps)) {
        continue;
      } else if (reads_global(s, i)) {  // a program input where it lies: this instance's tile of it
        const ProgramValue& v = value(id);
        os << "  const " << type(id) << "* const in" << i << " = g_" << input_name(v.input)
           << (v.batch_broadcast ? "" : " + tile * " + std::to_string(v.elements())) << ";\n";
      } else if (i == 0 && padded_fold(body, id)) {
        // its slots past the tile's elements fold as the identity, in a copy: later steps read the tile
        os << "  " << type(id) << " in0[" << place_in_registers(*value(id).layout, plan_.scope, value(id).name)->slots
           << "];\n  tp::padded_copy<" << body.fold_op << ", " << place_type(decls, id) << ">(in0, " << named("v", id)
           << ", lane);\n";
      } else if (reads(s, i)) {
        alias(os, "in" + std::to_string(i), id);
      }
    }
    alias(os, "out", s.result);
    os << "  " << body.call << "\n}\n";
  }

  // Operand i of step s where the call takes it as a scalar: a constant or run-time scalar (s<i>),
  // or one value a map reads as the scalar it is (in<i>: one divisor for a row, say); false for a tile
  bool scalar_operand(std::ostream& os, const ProgramStep& s, size_t i, bool maps) const {
    const int id = s.operands[i];
    const std::string one = maps && id >= 0 ? one_value(id) : "";
    if (id < 0) {
      const int arg = s.scalar_args.empty() ? -1 : s.scalar_args.at(i);
      os << "  const double s" << i << " = " << (arg >= 0 ? scalar_name(arg) : exact_double(s.scalars.at(i))) << ";\n";
    } else if (!one.empty()) {
      os << "  const tp::ScalarOperand<" << type(id) << "> in" << i << "{" << one << "};\n";
    }
    return id < 0 || !one.empty();
  }

  // ---- estimated chains (estimated_chain.h) ------------------------------------------------
  const EstimatedChain* chain_rounded_by(size_t k) const {
    for (const EstimatedChain& c : chains_) {
      if (c.cast == k) return &c;
    }
    return nullptr;
  }
  const EstimatedChain* chain_holding(size_t k) const {
    for (const EstimatedChain& c : chains_) {
      if (std::find(c.steps.begin(), c.steps.end(), k) != c.steps.end()) return &c;
    }
    return nullptr;
  }
  ChainRole role(size_t k) const { return plan_.steps[k].bound->plan().call.def->chain_role; }
  // Step k runs its op's fast form: an estimated op of a chain
  bool estimated(size_t k) const { return chain_holding(k) && role(k) == ChainRole::estimated; }
  // Value id at slot f as a chain's check reads it: a widened 16-bit value from its 16-bit
  // registers (half the registers of its float, live until the slot's check), else its own
  std::string slot_value(const EstimatedChain& chain, int id) const {
    for (size_t j : chain.steps) {
      const ProgramStep& s = plan_.steps[j];
      if (s.result == id && role(j) == ChainRole::widening) return "tp::widen(" + named("v", s.operands[0]) + "[f])";
    }
    return named("v", id) + "[f]";
  }
  static std::string fast_call(const ProgramStep& s) {
    Plan fast = s.bound->plan();
    fast.call.config["fastmath"] = true;
    return cuda::kernel_body(fast).call;
  }

  // The cast that rounds a chain: each slot's bound (the chain's roundings, then each estimated
  // op's bound at its operand) and the least magnitude of the products inside the chain, as
  // functions of the slot; each slot rounded and checked, then the slots whose rounding may differ
  // from the exact value's, one at a time, their chain run exactly
  void estimate_check(std::ostream& os, std::ostream& decls, const EstimatedChain& chain) {
    const ProgramStep& cast = plan_.steps[chain.cast];
    const int root = cast.operands[0];
    int products = 0;
    std::string steps, least;
    for (size_t j : chain.steps) {
      products += role(j) == ChainRole::product;
      steps += (steps.empty() ? "" : ", ") + std::to_string(j);
    }
    std::string bound = std::to_string(2 * products + 3) + " * tp::kEstimateU";
    for (size_t j : chain.steps) {
      const ProgramStep& s = plan_.steps[j];
      if (role(j) == ChainRole::estimated) {
        bound = "tp::Estimated<" + s.bound->plan().call.def->device_fn + ">::bound(" + slot_value(chain, s.operands[0]) +
                ", " + bound + ")";
      } else if (role(j) == ChainRole::product && s.result != root) {
        const std::string v = "tp::magnitude(" + named("v", s.result) + "[f])";
        least = least.empty() ? v : "tp::min_nan(" + least + ", " + v + ")";
      }
    }
    std::ostringstream body;
    body << "const auto bound = [&](int f) { return " << bound << "; };\n";
    if (least.empty()) {
      body << "const tp::NoneInside least;\n";
    } else {
      body << "const auto least = [&](int f) { return " << least << "; };\n";
    }
    body << "for (unsigned missed = tp::rounded_estimates(" << named("v", cast.result) << ", " << named("v", root)
         << ", bound, least); missed != 0; missed &= missed - 1) {\n"
         << "  const unsigned bit = missed & (0u - missed);\n"
         << "  tp::set_slot(" << named("v", cast.result) << ", bit, " << exact_chain(decls, chain) << ");\n"
         << "}\n";
    os << "// steps " << steps << " estimated with their fast forms: exact at the slots where the rounding of "
       << value(root).name << " to " << dtype_name(value(cast.result).dtype) << " may differ\n{\n";
    indented(os, body.str(), "  ");
    os << "}\n";
  }

  // The chain run exactly on one slot, out of line (a rare path: its registers stay out of the
  // common one's), with the maps that make its leaves from the program's inputs: a function in
  // tp_gen of the slot's leaves (those inputs, read again) and the scalars the steps read, each step
  // called on one-slot arrays as in the kernel; returns the call on the slot `bit`.
  std::string exact_chain(std::ostream& decls, const EstimatedChain& chain) {
    const ProgramStep& cast = plan_.steps[chain.cast];
    std::vector<size_t> run = chain.recomputed;
    run.insert(run.end(), chain.steps.begin(), chain.steps.end());
    run.push_back(chain.cast);
    std::sort(run.begin(), run.end());
    std::vector<std::string> params = {"const int lane"}, args = {"lane"};
    auto take = [&](const std::string& param, const std::string& arg) {
      if (std::find(params.begin(), params.end(), param) == params.end()) {
        params.push_back(param);
        args.push_back(arg);
      }
    };
    std::ostringstream fn;
    for (size_t k : run) fn << type(plan_.steps[k].result) << " " << named("t", plan_.steps[k].result) << "[1];\n";
    for (size_t k : run) {
      const ProgramStep& s = plan_.steps[k];
      const KernelBody body = step_namespace(decls, s, k);
      fn << "{\n  using namespace tp_gen::step" << k << ";\n  constexpr int kBodySlots = 1;\n";
      for (size_t i = 0; i < s.operands.size(); ++i) {
        const int id = s.operands[i];
        const std::string one = id >= 0 ? one_value(id) : "";
        const bool linked = std::any_of(run.begin(), run.end(), [&](size_t j) { return plan_.steps[j].result == id; });
        if (id < 0) {  // a run-time scalar a parameter, as the kernel's
          const int arg = s.scalar_args.empty() ? -1 : s.scalar_args.at(i);
          if (arg >= 0) take("const double " + scalar_name(arg), scalar_name(arg));
          scalar_operand(fn, s, i, false);
        } else if (!one.empty()) {  // the kernel's one value, passed
          take(std::string("const ") + type(id) + " " + named("o", id), one);
          fn << "  const tp::ScalarOperand<" << type(id) << "> in" << i << "{" << named("o", id) << "};\n";
        } else if (linked) {
          fn << "  auto& in" << i << " = " << named("t", id) << ";\n";
        } else {
          take(std::string("const ") + type(id) + " " + named("l", id), leaf_at(decls, id));
          fn << "  " << type(id) << " in" << i << "[1] = {" << named("l", id) << "};\n";
        }
      }
      fn << "  auto& out = " << named("t", s.result) << ";\n  " << body.call << "\n}\n";
    }
    fn << "return " << named("t", cast.result) << "[0];\n";
    const std::string name = "exact_chain" + std::to_string(chain.cast);
    decls << "// steps";
    for (size_t k : run) decls << " " << k;
    decls << " exactly on one slot: the estimated chain's rare path\n__device__ __noinline__ " << type(cast.result) << " "
          << name << "(";
    for (size_t i = 0; i < params.size(); ++i) decls << (i ? ", " : "") << params[i];
    decls << ") {\n";
    indented(decls, fn.str(), "  ");
    decls << "}\n";
    std::string call = "tp_gen::" + name + "(";
    for (size_t i = 0; i < args.size(); ++i) call += (i ? ", " : "") + args[i];
    return call + ")";
  }

  // A leaf of a chain at slot `bit`, for its rare path: a program input read again from global
  // memory (its registers need not stay live across the check), else its registers' slot
  std::string leaf_at(std::ostream& decls, int id) {
    const ProgramValue& v = value(id);
    if (v.input < 0) return "tp::slot_at(" + named("v", id) + ", bit)";
    return "tp::input_at<" + place_type(decls, id) + ">(g_" + input_name(v.input) +
           (v.batch_broadcast ? "" : " + tile * " + std::to_string(v.elements())) + ", lane, bit)";
  }

  static void indented(std::ostream& os, const std::string& text, const std::string& indent) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) os << indent << line << "\n";
  }

  // The step's descriptors in namespace step<k>, once; a map's kBodySlots are its result's
  // registers per thread (a chunk's, where the rows run in passes).
  KernelBody step_namespace(std::ostream& decls, const ProgramStep& s, size_t k) {
    const Plan& plan = s.bound->plan();
    KernelBody body = cuda::kernel_body(plan);
    syncs_ |= body.syncs_instances;
    if (!declared_.insert(k).second) return body;
    const std::string ns = "step" + std::to_string(k);
    decls << "namespace " << ns << " {\n" << body.decls;
    if (body.maps_slots && !launch_.maps_slots) {
      const bool row = chunked_row(plan_, value(s.result));
      decls << "constexpr int kBodySlots = " << (row ? plan_.rows->chunk_slots : plan.staged_output().place->slots)
            << ";\n";
    }
    decls << "}  // namespace " << ns << "\n";
    return body;
  }

  // ---- a program in passes over chunks of its rows (staging shared or streamed) -------------
  // Each reduction of a row is a pass: the chunks of the row inputs it needs are read in turn,
  // the maps and broadcasts that lead to the reduced row computed on each chunk, and each
  // lane's slots folded into its part as they come (the lane's fold in slot order, as the whole
  // row's); the parts then fold across lanes as the step's own call would. The values of one
  // element each are computed once, in program order; a last pass computes and stores the
  // rows the program returns.
  KernelBody passes() {
    const RowChunks& rows = *plan_.rows;
    std::ostringstream decls, os;
    decls << "using PRow = " << run_place_type({rows.owners, rows.vec, rows.padded}) << ";  // a row, a chunk at a time\n"
          << (memory_.shares.empty() ? ""
                                     : "using PShare = " + run_place_type({plan_.scope.cta_threads(), rows.vec, 0}) +
                                           ";  // a CTA's share of a row: its threads' slots\n")
          << "constexpr int kChunks = " << rows.chunks() << ";\n"
          << (rows.padded ? "constexpr int kChunkSlots = " + std::to_string(rows.chunk_slots)
                          : "constexpr long long kChunkElements = " + std::to_string(rows.chunk_elements()))
          << ";\n";
    for (size_t i = 0; i < plan_.values.size(); ++i) {
      const ProgramValue& v = plan_.values[i];
      if (!v.layout || chunked_row(plan_, v)) continue;
      const int id = static_cast<int>(i), out = output_of(id);
      os << "// " << v.name << ": " << dtype_name(v.dtype) << shape_str(v.shape) << " " << v.placement() << "\n";
      if (v.input >= 0 || out >= 0) {
        os << "auto& " << named("v", id) << " = " << (v.input >= 0 ? input_name(v.input) : output_name(out)) << ";\n";
      } else {
        os << type(id) << " " << named("v", id) << "[1];\n";
      }
    }
    for (const auto& [id, at] : memory_.shares) {
      const ProgramValue& v = value(id);
      const char* T = type(id);
      os << T << "* const " << share_name(id) << " = reinterpret_cast<" << T << "*>(smem + " << memory_.shares_at() + at
         << ");  // this CTA's share of " << v.name << "\n"
         << "tp::stage_share<PRow, PShare, kChunks, " << rows.chunk_slots << ">(" << share_name(id) << ", g_"
         << input_name(v.input) << " + tile * " << v.elements() << ", lane, lane % kCtaThreads);\n";
    }
    for (size_t k = 0; k < plan_.steps.size(); ++k) {
      const ProgramStep& s = plan_.steps[k];
      if (chunked_row(plan_, value(s.result))) continue;  // computed in the passes that need it
      // (a reduction's operand is a tile; a map's first may be a scalar, id -1)
      const bool folds_row = s.op != "copy" && s.bound->plan().call.def->family == OpFamily::reduction &&
                             chunked_row(plan_, value(s.operands.front()));
      if (folds_row) {
        pass(os, decls, {s.operands.front()}, &s, k);
      } else {
        os << "// step " << k << ": " << value(s.result).name << " = " << s.op << " [" << s.bound->plan().variant
           << "]" << (s.where.empty() ? "" : " at " + s.where) << "\n";
        call(os, decls, s, k);
      }
    }
    std::vector<int> stored;
    for (int id : plan_.outputs) {
      if (chunked_row(plan_, value(id))) stored.push_back(id);
    }
    if (!stored.empty()) pass(os, decls, stored, nullptr, 0);
    KernelBody body;
    body.decls = decls.str();
    body.call = os.str();
    body.syncs_instances = syncs_;
    body.stores_itself = true;
    if (!memory_.shares.empty()) body.shared_bytes = memory_.total();  // the CTA's shares of the rows
    return body;
  }

  // One pass: the rows `targets` computed chunk by chunk; with `fold`, folded by that step into
  // its result, else stored as the program's outputs.
  void pass(std::ostream& os, std::ostream& decls, const std::vector<int>& targets, const ProgramStep* fold, size_t k) {
    // A chunk's slots: an even row's from the chunk's first element on (every index a constant but
    // the lane's); a padded row's by their slot in the row, to tell the tail's slots past its end
    const bool padded = plan_.rows->padded > 0;
    const std::string at_chunk = padded ? "" : " + chunk * kChunkElements";
    const std::string chunk_slot = padded ? ", chunk * kChunkSlots" : "";
    std::set<int> needed(targets.begin(), targets.end());
    for (size_t j = plan_.steps.size(); j-- > 0;) {
      const ProgramStep& s = plan_.steps[j];
      if (!needed.count(s.result)) continue;
      for (size_t i = scatters_held(s) ? 1 : 0; i < s.operands.size(); ++i) {  // a scatter reads x's shape only
        const int id = s.operands[i];
        if (id >= 0 && chunked_row(plan_, value(id))) needed.insert(id);
      }
    }
    KernelBody folding;
    if (fold) {
      folding = step_namespace(decls, *fold, k);
      os << "// step " << k << ": " << value(fold->result).name << " = " << fold->op << " [" << fold->bound->plan().variant
         << "], a pass over the row's chunks" << (fold->where.empty() ? "" : " at " + fold->where) << "\n"
         << "{\n  " << type(fold->operands.front()) << " part = " << folding.fold_op << "::identity<"
         << type(fold->operands.front()) << ">();  // this lane's fold\n";
    } else {
      os << "// the outputs, a pass over the row's chunks\n{\n";
    }
    os << "  tp::for_each_chunk<kChunks>([&](const int chunk) {\n";
    std::ostringstream body;
    for (int id : needed) {
      const ProgramValue& v = value(id);
      if (v.input < 0) continue;
      if (memory_.shares.count(id)) {  // each thread reads back the slots it staged: no barrier
        body << type(id) << " " << named("v", id) << "[" << plan_.rows->chunk_slots << "];\n"
             << "tp::load_tile<PShare, tp::SharedAccess>(" << named("v", id) << ", " << share_name(id)
             << ", lane % kCtaThreads, chunk * " << plan_.rows->chunk_slots << ");\n";
        continue;
      }
      const std::string row = staged_in_shared(plan_, v) ? input_name(v.input)
                              : "g_" + input_name(v.input) + (v.batch_broadcast ? "" : " + tile * " + std::to_string(v.elements()));
      body << type(id) << " " << named("v", id) << "[" << plan_.rows->chunk_slots << "];\n"
           << "tp::load_tile<PRow, " << access(v, fold) << ">(" << named("v", id) << ", " << row
           << at_chunk << ", lane" << chunk_slot << ");\n";
    }
    for (size_t j = 0; j < plan_.steps.size(); ++j) {
      const ProgramStep& s = plan_.steps[j];
      if (!needed.count(s.result) || !chunked_row(plan_, value(s.result))) continue;
      body << "// step " << j << ": " << value(s.result).name << " = " << s.op << " [" << s.bound->plan().variant << "]\n"
           << type(s.result) << " " << named("v", s.result) << "[" << plan_.rows->chunk_slots << "];\n";
      if (s.op == "copy") {  // one value every lane holds, over the chunk
        body << "tp::gather<PRow>(" << named("v", s.result) << ", lane, [&](long long) { return " << named("v", s.operands[0])
             << "[0]; }" << chunk_slot << ");\n";
      } else if (scatters_held(s)) {  // one value at one position of the row, which every lane holds
        const char* T = type(s.result);
        body << "const long long at" << j << " = tp::position_of(" << named("v", s.operands[1]) << "[0], "
             << value(s.result).elements() << "LL);\n"
             << "const " << T << " summed" << j << " = tp::add(tp::cast<" << T << ">(0.0f), " << named("v", s.operands[2])
             << "[0]);\n"
             << "tp::gather<PRow>(" << named("v", s.result) << ", lane, [&](long long e) { return tp::scattered_one(e"
             << at_chunk << ", at" << j << ", summed" << j << "); }" << chunk_slot << ");\n";
      } else {
        call(body, decls, s, j);
      }
    }
    if (fold) {
      if (padded) {  // the last chunks' slots past the row fold as the identity
        body << "tp::pad_identity<" << folding.fold_op << ", PRow>(" << named("v", fold->operands.front())
             << ", lane" << chunk_slot << ");\n";
      }
      body << "tp::fold_run<" << folding.fold_op << ">(part, " << named("v", fold->operands.front()) << ");\n";
    } else {
      for (size_t j = 0; j < plan_.outputs.size(); ++j) {
        const int id = plan_.outputs[j];
        if (!chunked_row(plan_, value(id))) continue;
        if (folded(plan_, j)) {
          body << "if (live) tp::fold_tile_into<PRow>(sum_" << output_name(j) << at_chunk << ", " << named("v", id)
               << ", lane" << chunk_slot << ");\n";
        } else {
          body << "if (live) tp::store_tile<PRow, tp::LastAccess>(g_" << output_name(j) << " + tile * "
               << value(id).elements() << at_chunk << ", " << named("v", id) << ", lane" << chunk_slot << ");\n";
        }
      }
    }
    indented(os, body.str(), "    ");
    os << "  });\n";
    if (fold) {
      os << "  " << named("v", fold->result) << "[0] = tp::butterfly<" << folding.fold_op << ">(" << folding.fold_lanes
         << ", part, tp_gen::step" << k << "::kMasks);\n";
    }
    os << "}\n";
  }

  static bool scatters_held(const ProgramStep& s) { return s.bound->plan().variant == "scatter_held"; }

  // How a pass reads a row input: from shared memory where it is staged there; else from global
  // memory, for the last time in the outputs' pass (but a row the whole batch shares).
  std::string access(const ProgramValue& v, const ProgramStep* fold) const {
    if (staged_in_shared(plan_, v)) return "tp::SharedAccess";
    return fold || v.batch_broadcast ? "tp::GlobalAccess" : "tp::LastAccess";
  }

  // Where `id` is a copy of one value to each of its elements (a row's sum, broadcast over the
  // row) that every lane can read, that value's expression; else "".
  std::string one_value(int id) const {
    const int a = plan_.scalar_source(id);
    if (a < 0) return "";
    // in passes over a row's chunks, each lane holds the values of one element (passes())
    if (plan_.rows || value(a).in_registers()) return named("v", a) + "[0]";
    return named("v", a) + "[tp::memory_offset(" + named("kMem", a) + ", 0)]";
  }

  // A fold whose source is a padded register tile.
  bool padded_fold(const KernelBody& body, int id) const {
    return !body.fold_op.empty() && value(id).in_registers() && value(id).layout->padded();
  }

  static std::string share_name(int id) { return "share" + std::to_string(id); }

  void alias(std::ostream& os, const std::string& name, int id) const {
    if (value(id).in_registers()) {
      os << "  auto& " << name << " = " << named("v", id) << ";\n";
    } else {
      os << "  " << type(id) << "* const " << name << " = " << named("v", id) << ";\n";
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
    if (src.held_by_every_lane(plan_.scope)) {
      source = named("v", a) + "[" + index + "]";
    } else if (src.in_registers() && !dst.in_registers() && !broadcast) {
      os << "tp::scatter<" << place_type(decls, a) << ">(" << named("v", a) << ", lane, [&](long long e, " << T << " x) { "
         << named("v", r) << "[tp::memory_offset(" << named("kMem", r) << ", e)] = x; });\n";
      return;
    } else if (src.in_registers()) {
      if (plan_.scope.kind == ScopeKind::cluster) {
        throw ValueError(plan_.name + ": step " + std::to_string(k) + " moves " + src.name + " between threads at " +
                         plan_.scope.str() + ": a cluster's lanes exchange values only in reductions' butterflies "
                         "(each CTA has its own shared memory)");
      }
      sync(os);  // the scratch area's last readers are done
      os << "{\n  " << T << "* const spill = reinterpret_cast<" << T << "*>(scratch);\n"
         << "  tp::scatter<" << place_type(decls, a) << ">(" << named("v", a) << ", lane, [&](long long e, " << T
         << " x) { spill[e] = x; });\n}\n";
      synced_ = false;
      sync(os);
      source = "reinterpret_cast<const " + std::string(T) + "*>(scratch)[" + index + "]";
    } else {
      source = named("v", a) + "[tp::memory_offset(" + named("kMem", a) + ", " + index + ")]";
    }
    if (dst.in_registers()) {
      os << "tp::gather<" << place_type(decls, r) << ">(" << named("v", r) << ", lane, [&](long long e) { return " << source
         << "; });\n";
    } else {
      os << "tp::fill_shared<kThreads>(" << named("v", r) << ", " << named("kMem", r) << ", " << elements_of(dst)
         << ", lane, [&](long long e) { return " << source << "; });\n";
    }
  }

  // The type through which gathers and scatters see the register placement of `id`, declared once.
  std::string place_type(std::ostream& decls, int id) {
    const std::string name = named("P", id);
    if (places_.insert(id).second) {
      decls << cuda_place_type(name, *place_in_registers(*value(id).layout, plan_.scope, value(id).name));
    }
    return name;
  }

  // Outputs the frame's operand could not hold from the start: an input returned as it is, or
  // a value returned twice; the same placement, so a copy slot by slot (or element by element).
  void copy_out(std::ostream& os) {
    for (size_t j = 0; j < plan_.outputs.size(); ++j) {
      const int id = plan_.outputs[j];
      if (output_of(id) == static_cast<int>(j)) continue;
      const ProgramValue& v = value(id);
      if (v.in_registers()) {
        os << "tp::copy_slots(" << output_name(j) << ", " << named("v", id) << ");\n";
      } else {
        sync(os);
        os << "tp::copy_shared<kThreads>(" << output_name(j) << ", " << named("v", id) << ", " << v.layout->span()
           << ", lane);\n";
      }
    }
  }

  const ProgramPlan& plan_;
  int instances_;
  BodyMemory memory_;
  bool synced_ = true;  // the frame syncs the instance after staging its inputs
  bool syncs_ = false;  // a barrier was emitted
  std::set<size_t> declared_;  // steps whose namespace is declared
  std::set<int> places_;       // values whose placement type is declared
  KernelBody launch_;
  std::vector<EstimatedChain> chains_;
};

// The frame's operands (the program's inputs in argument order, its run-time scalars, then its
// outputs) and what the launch shape depends on; the body's text comes once the instances per
// block are known.
FrameSpec program_operands(const ProgramPlan& plan) {
  FrameSpec spec;
  spec.title = "tileprim kernel: " + plan.name + " at " + plan.scope.str() + ":";
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    spec.title += std::string(k ? ", " : " ") + plan.steps[k].op + " [" + plan.steps[k].bound->plan().variant + "]";
  }
  spec.scope = plan.scope;
  std::vector<const ProgramValue*> inputs;
  for (const ProgramValue& v : plan.values) {
    if (v.input >= 0) inputs.push_back(&v);
    if (std::find(spec.dtypes.begin(), spec.dtypes.end(), v.dtype) == spec.dtypes.end()) spec.dtypes.push_back(v.dtype);
  }
  std::sort(inputs.begin(), inputs.end(), [](const ProgramValue* a, const ProgramValue* b) { return a->input < b->input; });
  for (const ProgramValue* v : inputs) spec.operands.push_back(operand_of(plan, *v, v->input, input_name(v->input), false));
  for (int k = 0; k < plan.scalar_args; ++k) {
    FrameOperand a;
    a.name = scalar_name(k);
    a.kind = Staging::scalar;
    spec.operands.push_back(a);
  }
  for (size_t j = 0; j < plan.outputs.size(); ++j) {
    const int id = plan.outputs[j];
    spec.operands.push_back(operand_of(plan, plan.values.at(id), id, output_name(j), true));
    spec.operands.back().folded = folded(plan, j);
  }
  spec.folded_tiles = plan.folded_tiles;
  spec.body = launch_body(plan);
  return spec;
}

}  // namespace

KernelSource program_launch(const ProgramPlan& plan, const std::string& arch) {
  return frame_launch(program_frame(plan, arch), arch);
}

FrameSpec program_frame(const ProgramPlan& plan, const std::string& arch, int max_instances) {
  FrameSpec spec = program_operands(plan);
  spec.max_instances = max_instances;
  spec.prefetch_if_alone = maps_outlast_row_load(plan);
  spec.body = ProgramBody(plan, frame_launch(spec, arch).instances, spec.body).render();
  return spec;
}

}  // namespace tp
