#include "layout/exec_scope.h"

#include "errors.h"

namespace tp {

ExecScope ExecScope::cta(int threads) {
  if (threads < 1 || threads > 1024) {
    throw ValueError("scope: cta(threads=" + std::to_string(threads) +
                     ") needs 1 <= threads <= 1024");
  }
  return {ScopeKind::cta, threads};
}

ExecScope ExecScope::named(const std::string& kind, int threads) {
  if (kind == "thread") return thread();
  if (kind == "warp") return warp();
  if (kind == "warpgroup") return warpgroup();
  if (kind == "cta") return cta(threads);
  throw ValueError("scope: unknown exec scope '" + kind + "'; use thread, warp, warpgroup or cta(threads)");
}

std::string ExecScope::kind_name() const {
  switch (kind) {
    case ScopeKind::thread: return "thread";
    case ScopeKind::warp: return "warp";
    case ScopeKind::warpgroup: return "warpgroup";
    case ScopeKind::cta: return "cta";
  }
  return "?";
}

std::string ExecScope::str() const {
  return kind == ScopeKind::cta ? "cta(" + std::to_string(threads) + ")" : kind_name();
}

bool ExecScope::offers(Axis a) const {
  if (!is_thread_axis(a)) return true;
  switch (kind) {
    case ScopeKind::thread: return false;
    case ScopeKind::warp: return a == Axis::laneid;
    case ScopeKind::warpgroup:
      return a == Axis::laneid || a == Axis::wid_in_wg || a == Axis::tid_in_wg;
    case ScopeKind::cta: return true;
  }
  return false;
}

}  // namespace tp
