#include "backends/cuda/estimated_chain.h"

#include <algorithm>

#include "layout/placement.h"

namespace tp {

namespace {

// The most slots per thread a chain estimates (a standalone map's bundle, as the 16-bit maps'
// estimates: maps.cuh's kEstimateGroup): what its bounds read stays live beside the chain until
// each slot's check, which on a larger tile would take registers, and blocks, off the SM.
constexpr int kMostSlots = 8;

class ChainFinder {
 public:
  explicit ChainFinder(const ProgramPlan& plan) : plan_(plan), readers_(plan.values.size(), 0) {
    for (const ProgramStep& s : plan.steps) {
      for (int id : s.operands) {
        if (id >= 0) ++readers_.at(static_cast<size_t>(id));
      }
    }
    for (int id : plan.outputs) readers_.at(static_cast<size_t>(id)) += 2;  // an output is never a link
  }

  // The chain whose value the cast step k rounds, where there is one
  bool chain_of(size_t k, EstimatedChain& chain) {
    const ProgramStep& cast = plan_.steps[k];
    if (cast.op != "cast" || cast.operands.size() != 1 || cast.operands[0] < 0) return false;
    const int root = cast.operands[0];
    if (!is_16bit_float(value(cast.result).dtype) || !value(cast.result).in_registers()) return false;
    slots_ = value(root).dtype == DType::float32 ? slots_of(root) : 0;
    chain = EstimatedChain{k, {}};
    estimated_ = false;
    if (slots_ <= 0 || slots_ > kMostSlots || !link(root, chain.steps) || !estimated_) return false;
    std::sort(chain.steps.begin(), chain.steps.end());
    for (size_t j : chain.steps) {
      for (int id : plan_.steps[j].operands) {
        const bool linked = std::any_of(chain.steps.begin(), chain.steps.end(),
                                        [&](size_t c) { return plan_.steps[c].result == id; });
        std::vector<size_t> made;
        if (!linked && recomputable(id, made)) chain.recomputed.insert(chain.recomputed.end(), made.begin(), made.end());
      }
    }
    std::sort(chain.recomputed.begin(), chain.recomputed.end());
    chain.recomputed.erase(std::unique(chain.recomputed.begin(), chain.recomputed.end()), chain.recomputed.end());
    return true;
  }

 private:
  const ProgramValue& value(int id) const { return plan_.values.at(static_cast<size_t>(id)); }

  // A register value's slots per thread, else 0
  int slots_of(int id) const {
    const ProgramValue& v = value(id);
    return v.in_registers() ? place_in_registers(*v.layout, plan_.scope, v.name)->slots : 0;
  }
  bool float_slots(int id) const { return value(id).dtype == DType::float32 && slots_of(id) == slots_; }

  // The step making value id, where the chain may hold it: a register map of float32 with the
  // chain's slots that only the chain reads, run exactly, whose op the chain estimates, multiplies
  // or widens (from 16 bits)
  const ProgramStep* step_of(int id) const {
    if (id < 0 || value(id).input >= 0 || readers_.at(static_cast<size_t>(id)) != 1 || !float_slots(id)) return nullptr;
    const ProgramStep& s = plan_.steps.at(static_cast<size_t>(value(id).written));
    const OpCall& call = s.bound->plan().call;
    if (s.result != id || call.def->family != OpFamily::elementwise || call.def->chain_role == ChainRole::none ||
        call.flag("fastmath")) {
      return nullptr;
    }
    const bool widens = call.def->chain_role == ChainRole::widening;
    if (widens && (s.operands.size() != 1 || s.operands[0] < 0 || !is_16bit_float(value(s.operands[0]).dtype) ||
                   slots_of(s.operands[0]) != slots_)) {
      return nullptr;
    }
    return &s;
  }

  bool widened(int id) const {
    const ProgramStep* s = step_of(id);
    return s && s->bound->plan().call.def->chain_role == ChainRole::widening;
  }

  // A value the chain reads as it is: float registers slot for slot with the chain's, or one value
  bool leaf(int id) const { return id < 0 || plan_.scalar_source(id) >= 0 || float_slots(id); }

  // Whether a leaf the rare path reads, value id, can be made again there from the program's inputs
  // and one values by the register maps (slot for slot with the chain's, run exactly) that make it,
  // added to `made`; not a scalar, one value or input (the rare path reads those as they are)
  bool recomputable(int id, std::vector<size_t>& made) const {
    if (id < 0 || plan_.scalar_source(id) >= 0 || value(id).input >= 0 || slots_of(id) != slots_) return false;
    const size_t k = static_cast<size_t>(value(id).written);
    const ProgramStep& s = plan_.steps.at(k);
    const OpCall& call = s.bound->plan().call;
    if (s.result != id || s.op == "copy" || call.def->family != OpFamily::elementwise || call.flag("fastmath")) {
      return false;
    }
    for (int operand : s.operands) {
      const bool as_it_is = operand < 0 || plan_.scalar_source(operand) >= 0 ||
                            (value(operand).input >= 0 && slots_of(operand) == slots_);
      if (!as_it_is && !recomputable(operand, made)) return false;
    }
    made.push_back(k);
    return true;
  }

  // Value id joins the chain, with the steps that make it (where one fails, the steps it added go)
  bool link(int id, std::vector<size_t>& steps) {
    const size_t linked = steps.size();
    const bool estimated = estimated_;
    if (joins(id, steps)) return true;
    steps.resize(linked);
    estimated_ = estimated;
    return false;
  }
  bool joins(int id, std::vector<size_t>& steps) {
    const ProgramStep* s = step_of(id);
    if (!s) return false;
    steps.push_back(static_cast<size_t>(value(id).written));
    switch (s->bound->plan().call.def->chain_role) {
      case ChainRole::widening:
        return true;
      case ChainRole::estimated: {  // its operand is read as it is: an error in it would grow through the op
        estimated_ = true;
        const int x = s->operands.size() == 1 ? s->operands[0] : -1;
        return x >= 0 && ((widened(x) && link(x, steps)) || float_slots(x));
      }
      default:
        for (int operand : s->operands) {
          if (!link(operand, steps) && !leaf(operand)) return false;
        }
        return true;
    }
  }

  const ProgramPlan& plan_;
  std::vector<int> readers_;
  int slots_ = 0;
  bool estimated_ = false;
};

}  // namespace

std::vector<EstimatedChain> estimated_chains(const ProgramPlan& plan) {
  std::vector<EstimatedChain> chains;
  if (plan.rows) return chains;
  ChainFinder finder(plan);
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    EstimatedChain chain;
    if (finder.chain_of(k, chain)) chains.push_back(std::move(chain));
  }
  return chains;
}

}  // namespace tp
