// The exceptions the core raises; the bindings map them to Python's ValueError, TypeError
// and tileprim.DispatchError. Every message names the argument and the rule it broke.
#pragma once
#include <stdexcept>
#include <string>

namespace tp {

struct ValueError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct TypeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A tile past a limit of the target's or tileprim's (registers per thread, shared memory per
// block): a scope with more threads, a smaller tile or another storage may hold it. Planners that
// try placements tell it from other refusals by its type.
struct LimitError : ValueError {
  using ValueError::ValueError;
};

// No variant accepted the call; the message is the whole trace table. past_limit: some variant
// declined for a LimitError.
struct DispatchError : ValueError {
  explicit DispatchError(const std::string& what, bool past_limit = false) : ValueError(what), past_limit(past_limit) {}
  bool past_limit = false;
};

// Whether a refusal is for a tile past a limit: a LimitError, or a DispatchError that says so.
inline bool past_limit(const ValueError& e) {
  const auto* dispatch = dynamic_cast<const DispatchError*>(&e);
  return dynamic_cast<const LimitError*>(&e) != nullptr || (dispatch && dispatch->past_limit);
}

}  // namespace tp
