#include "layout/exec_scope.h"

#include "errors.h"

namespace tp {

ExecScope ExecScope::cta(int threads) {
  if (threads < 1 || threads > kMaxCtaThreads) {
    throw ValueError("scope: cta(threads=" + std::to_string(threads) + ") needs 1 <= threads <= " +
                     std::to_string(kMaxCtaThreads));
  }
  return {ScopeKind::cta, threads};
}

int ExecScope::fixed_threads(ScopeKind kind) {
  switch (kind) {
    case ScopeKind::thread: return 1;
    case ScopeKind::warp: return 32;
    case ScopeKind::warpgroup: return 128;
    case ScopeKind::cta: return 0;
  }
  return 0;
}

const std::vector<ScopeKind>& ExecScope::kinds() {
  static const std::vector<ScopeKind> all = {ScopeKind::thread, ScopeKind::warp, ScopeKind::warpgroup, ScopeKind::cta};
  return all;
}

ExecScope ExecScope::named(const std::string& kind, int threads) {
  for (ScopeKind k : kinds()) {
    const ExecScope scope{k, k == ScopeKind::cta ? 1 : fixed_threads(k)};
    if (kind == scope.kind_name()) return k == ScopeKind::cta ? cta(threads) : scope;
  }
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
