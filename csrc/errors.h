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

// No variant accepted the call; the message is the whole trace table.
struct DispatchError : ValueError {
  using ValueError::ValueError;
};

}  // namespace tp
