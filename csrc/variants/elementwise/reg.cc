// elementwise -> reg (priority 10): every operand in registers, partitioned by the anchor's
// (the output's) layout: the thread axes pick the thread, what remains is that thread's
// private bundle, and the op is applied register by register.
#include <memory>

#include "backends/cpu/staging.h"
#include "backends/cuda/codegen.h"
#include "backends/cpu/type_switch.h"
#include "dispatch/registry.h"
#include "errors.h"
#include "layout/placement.h"
#include "tileprim/elementwise/maps.cuh"

namespace tp {
namespace {

struct RegPlan : VariantPlan {
  RegisterPlacement place;
};

const TileLayout& anchor_of(const OpCall& call) { return *call.output.layout; }

std::string operand_scope(const OpCall& call, const DispatchContext&) {
  std::string reasons;
  auto check = [&](const TileRef& t) {
    if (!t.scalar && t.storage != Storage::local) {
      reasons += (reasons.empty() ? "" : "; ") + std::string("operand scope ") + storage_name(t.storage) +
                 " != local (" + t.arg + ")";
    }
  };
  for (const TileRef& t : call.inputs) check(t);
  check(call.output);
  return reasons;
}

std::string anchor_layout(const OpCall& call, const DispatchContext&) {
  return anchor_of(call).swizzled() ? "anchor layout is swizzle" : "";
}

std::string scope_anchor(const OpCall& call, const DispatchContext&) {
  if (call.scope.kind == ScopeKind::thread) return "";
  const TileLayout& anchor = anchor_of(call);
  if (!anchor.has_thread_axes()) {
    return "got a thread-local view with no thread axes; pass the " + call.scope.kind_name() +
           "-level tile's layout (e.g. S[(32, 8) : (1@laneid, 1)])";
  }
  const RegisterPlacement p = place_in_registers(anchor, call.scope, "out_layout");
  int covered = 0;
  for (int t = 0; t < p.threads; ++t) {
    for (int s = 0; s < p.slots; ++s) {
      if (p.element_at(t, s) >= 0) {
        ++covered;
        break;
      }
    }
  }
  if (covered == p.threads) return "";
  return "layout covers " + std::to_string(covered) + " of the " + std::to_string(p.threads) + " threads of " +
         call.scope.str() + " scope; reg needs every thread of the scope";
}

std::string operand_layouts(const OpCall& call, const DispatchContext&) {
  std::string reasons;
  for (const TileRef& t : call.inputs) {
    if (t.scalar || !t.layout || *t.layout == anchor_of(call)) continue;
    reasons += (reasons.empty() ? "" : "; ") + t.arg + " layout " + t.layout->str() + " differs from the anchor's " +
               anchor_of(call).str();
  }
  return reasons;
}

// The operand as the map template takes it: its registers, or its scalar value.
template <class T, class F>
void with_operand(const TileRef& ref, const T* regs, F&& f) {
  if (ref.scalar) return f(ScalarOperand<T>{convert_to<T>::from(ref.value)});
  return f(RegOperand<T>{regs});
}

template <class F> void with_unary(const std::string& op, F&& f) {
  if (op == "sqrt") return f(map_op::Sqrt{});
  if (op == "exp") return f(map_op::Exp{});
  if (op == "exp2") return f(map_op::Exp2{});
  if (op == "log2") return f(map_op::Log2{});
  if (op == "reciprocal") return f(map_op::Reciprocal{});
  if (op == "silu") return f(map_op::Silu{});
  throw std::logic_error("reg: no unary map for " + op);
}

template <class F> void with_binary(const std::string& op, bool propagate_nan, F&& f) {
  if (op == "add") return f(map_op::Add{});
  if (op == "sub") return f(map_op::Sub{});
  if (op == "mul") return f(map_op::Mul{});
  if (op == "fdiv") return f(map_op::Fdiv{});
  if (op == "maximum") return propagate_nan ? f(map_op::MaximumNaN{}) : f(map_op::Maximum{});
  throw std::logic_error("reg: no binary map for " + op);
}

bool exactly_rounded(const std::string& op, DType t) {
  const bool wide = t == DType::float32 || t == DType::float64;
  if (op == "add" || op == "sub" || op == "mul" || op == "fma" || op == "maximum" || op == "zero" ||
      op == "fill" || op == "cast") {
    return true;
  }
  return wide && (op == "sqrt" || op == "fdiv" || op == "reciprocal");
}

class RegElementwise : public Variant {
 public:
  RegElementwise()
      : Variant("reg", 10,
                {"zero", "fill", "reciprocal", "sqrt", "exp", "exp2", "log2", "silu", "add", "sub", "mul", "fdiv",
                 "maximum", "fma", "cast"},
                {{"operand_scope", operand_scope},
                 {"anchor_layout", anchor_layout},
                 {"scope_anchor", scope_anchor},
                 {"operand_layouts", operand_layouts}}) {}

  void plan(Plan& plan) const override {
    auto p = std::make_shared<RegPlan>();
    p->place = place_in_registers(anchor_of(plan.call), plan.call.scope, "out_layout");
    long long bundle = 0;
    for (int s = 0; s < p->place.slots; ++s) bundle += p->place.element_at(0, s) >= 0;
    plan.set("registers_per_thread", static_cast<long long>(p->place.slots));
    plan.set("bundle", bundle);
    plan.set("vec_len", 1ll);
    const DType t = plan.call.output.dtype;
    plan.note("compute_dtype", dtype_name(plan.call.inputs[0].scalar ? t : plan.call.inputs[0].dtype));
    plan.note("rounding", exactly_rounded(plan.call.op, t)
                              ? "exactly rounded (round to nearest even): CPU and GPU agree bit for bit"
                              : "the CUDA math function's accuracy; the CPU backend rounds the exact value");
    plan.note("ftz", "no: subnormals kept");
    if (plan.call.op == "maximum") {
      plan.note("nan", plan.call.flag("propagate_nan") ? "max.NaN: NaN propagates (like np.maximum)"
                                                       : "fmaxf: a NaN meeting a number yields the number");
    }
    plan.detail = p;
  }

  void run_cpu(const Plan& plan, const HostTensors& io) const override {
    const auto& p = plan.detail_as<RegPlan>();
    const OpCall& call = plan.call;
    const long long n = call.output.elements();
    with_host_type(call.output.dtype, [&](auto out_tag) {
      using TD = typename decltype(out_tag)::type;
      TD* out = static_cast<TD*>(io.output);
      for (long long tile = 0; tile < io.tiles; ++tile) {
        std::vector<TD> dst = poisoned<TD>(static_cast<size_t>(p.place.threads) * p.place.slots);
        run_tile<TD>(call, p.place, io, tile * n, dst);
        store_registers(p.place, dst, out + tile * n);
      }
    });
  }

  void emit_cuda(const Plan& plan, KernelSource& k) const override {
    const auto& p = plan.detail_as<RegPlan>();
    const OpCall& call = plan.call;
    const DType td = call.output.dtype;
    const char* TD = dtype_cuda_name(td);
    k.use(td);
    frame_for(call.scope, 0, k);
    const long long n = call.output.elements();
    std::vector<std::string> operands;
    for (size_t i = 0; i < call.inputs.size(); ++i) {
      const TileRef& ref = call.inputs[i];
      const std::string idx = std::to_string(i);
      if (ref.scalar) {
        operands.push_back(std::string("tp::ScalarOperand<") + TD + ">{tp::cast<" + TD + ">(s" + idx + ")}");
        continue;
      }
      const char* T = dtype_cuda_name(ref.dtype);
      emit_load_registers(k, "a" + idx, ref.dtype, p.place, "kLoad", "in" + idx + "_", n);
      operands.push_back(std::string("tp::RegOperand<") + T + ">{a" + idx + "}");
    }
    k.body << "  " << TD << " dst[" << p.place.slots << "];\n";
    const std::string slots = std::to_string(p.place.slots);
    auto map = [&](const std::string& op, const std::vector<std::string>& args) {
      k.body << "  tp::map_registers<" << op << ", tp::kUnrollRegisters>(dst, " << slots;
      for (const std::string& a : args) k.body << ", " << a;
      k.body << ");\n";
    };
    if (call.op == "zero") {
      k.body << "  tp::zero_registers<tp::kUnrollRegisters>(dst, " << slots << ");\n";
    } else if (call.op == "cast") {
      map(std::string("tp::map_op::Cast<") + TD + ">", operands);
    } else if (call.op == "fill") {
      map(map_op::Copy::kCudaName, {operands[1]});
    } else if (call.op == "fma") {
      map(map_op::Fma::kCudaName, operands);
    } else if (operands.size() == 1) {
      with_unary(call.op, [&](auto op) { map(decltype(op)::kCudaName, operands); });
    } else {
      with_binary(call.op, call.flag("propagate_nan"), [&](auto op) { map(decltype(op)::kCudaName, operands); });
    }
    emit_store_registers(k, "dst", td, p.place, "kStore", n, call.scope);
  }

 private:
  template <class TD>
  static void run_tile(const OpCall& call, const RegisterPlacement& place, const HostTensors& io, long long offset,
                       std::vector<TD>& dst) {
    const int slots = place.slots;
    if (call.op == "zero") {
      for (int t = 0; t < place.threads; ++t) zero_registers<kUnrollMemory>(dst.data() + t * slots, slots);
      return;
    }
    if (call.op == "cast") {
      with_host_type(call.inputs[0].dtype, [&](auto src_tag) {
        using TS = typename decltype(src_tag)::type;
        const auto regs = load_registers(place, static_cast<const TS*>(io.inputs[0]) + offset);
        for (int t = 0; t < place.threads; ++t) {
          map_registers<map_op::Cast<TD>, kUnrollMemory>(dst.data() + t * slots, slots,
                                                           RegOperand<TS>{regs.data() + t * slots});
        }
      });
      return;
    }
    // every other op reads operands of the output's dtype
    std::vector<std::vector<TD>> regs;
    for (size_t i = 0; i < call.inputs.size(); ++i) {
      const TileRef& ref = call.inputs[i];
      regs.push_back(ref.scalar ? std::vector<TD>() : load_registers(place, static_cast<const TD*>(io.inputs[i]) + offset));
    }
    auto reg_ptr = [&](size_t i, int t) { return regs[i].empty() ? nullptr : regs[i].data() + t * slots; };
    for (int t = 0; t < place.threads; ++t) {
      TD* d = dst.data() + t * slots;
      if (call.op == "fill") {
        with_operand<TD>(call.inputs[1], nullptr, [&](auto v) { map_registers<map_op::Copy, kUnrollMemory>(d, slots, v); });
      } else if (call.inputs.size() == 1) {
        with_unary(call.op, [&](auto op) {
          with_operand<TD>(call.inputs[0], reg_ptr(0, t),
                           [&](auto a) { map_registers<decltype(op), kUnrollMemory>(d, slots, a); });
        });
      } else if (call.inputs.size() == 2) {
        with_binary(call.op, call.flag("propagate_nan"), [&](auto op) {
          with_operand<TD>(call.inputs[0], reg_ptr(0, t), [&](auto a) {
            with_operand<TD>(call.inputs[1], reg_ptr(1, t),
                             [&](auto b) { map_registers<decltype(op), kUnrollMemory>(d, slots, a, b); });
          });
        });
      } else {
        with_operand<TD>(call.inputs[0], reg_ptr(0, t), [&](auto a) {
          with_operand<TD>(call.inputs[1], reg_ptr(1, t), [&](auto b) {
            with_operand<TD>(call.inputs[2], reg_ptr(2, t),
                             [&](auto c) { map_registers<map_op::Fma, kUnrollMemory>(d, slots, a, b, c); });
          });
        });
      }
    }
  }
};

}  // namespace

void register_elementwise_reg(Registry& r) { r.add(std::make_unique<RegElementwise>()); }

}  // namespace tp
