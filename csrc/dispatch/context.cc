#include "dispatch/context.h"

#include <cctype>

#include "errors.h"

namespace tp {

DispatchContext DispatchContext::for_target(const std::string& target) {
  DispatchContext ctx;
  ctx.target = target;
  if (target.empty()) return ctx;
  size_t i = 3;
  bool ok = target.rfind("sm_", 0) == 0 && target.size() > 3;
  while (ok && i < target.size() && std::isdigit(static_cast<unsigned char>(target[i]))) ++i;
  ok = ok && i > 3 && (i == target.size() || (i + 1 == target.size() && (target[i] == 'a' || target[i] == 'f')));
  if (!ok) {
    throw ValueError("target: '" + target + "' is not an architecture like 'sm_90a' or 'sm_100a'");
  }
  ctx.sm_version = std::stoi(target.substr(3, i - 3));
  return ctx;
}

}  // namespace tp
