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

ExecScope ExecScope::cluster(int ctas, int cta_threads) {
  if (ctas != 2 && ctas != 4 && ctas != 8 && ctas != 16) {
    throw ValueError("scope: cluster(ctas=" + std::to_string(ctas) + ") needs 2, 4, 8 or 16 CTAs");
  }
  if (cta_threads < 32 || cta_threads > kMaxCtaThreads || cta_threads % 32 != 0) {
    throw ValueError("scope: cluster(threads=" + std::to_string(cta_threads) +
                     ") needs whole warps per CTA: a multiple of 32 from 32 to " + std::to_string(kMaxCtaThreads));
  }
  return {ScopeKind::cluster, ctas * cta_threads, ctas};
}

int ExecScope::fixed_threads(ScopeKind kind) {
  switch (kind) {
    case ScopeKind::thread: return 1;
    case ScopeKind::warp: return 32;
    case ScopeKind::warpgroup: return 128;
    case ScopeKind::cta: return 0;
    case ScopeKind::cluster: return 0;
  }
  return 0;
}

const std::vector<ScopeKind>& ExecScope::kinds() {
  static const std::vector<ScopeKind> all = {ScopeKind::thread, ScopeKind::warp, ScopeKind::warpgroup, ScopeKind::cta,
                                                ScopeKind::cluster};
  return all;
}

ExecScope ExecScope::named(const std::string& kind, int threads, int ctas) {
  if (kind == "cluster") {
    if (ctas < 1 || threads % ctas != 0) {
      throw ValueError("scope: a cluster of " + std::to_string(ctas) + " CTAs cannot have " + std::to_string(threads) +
                       " lanes (ctas * threads per CTA)");
    }
    return cluster(ctas, threads / ctas);
  }
  for (ScopeKind k : kinds()) {
    const ExecScope scope{k, k == ScopeKind::cta ? 1 : fixed_threads(k)};
    if (kind == scope.kind_name()) return k == ScopeKind::cta ? cta(threads) : scope;
  }
  throw ValueError("scope: unknown exec scope '" + kind +
                   "'; use thread, warp, warpgroup, cta(threads) or cluster(ctas, threads)");
}

std::string ExecScope::kind_name() const {
  switch (kind) {
    case ScopeKind::thread: return "thread";
    case ScopeKind::warp: return "warp";
    case ScopeKind::warpgroup: return "warpgroup";
    case ScopeKind::cta: return "cta";
    case ScopeKind::cluster: return "cluster";
  }
  return "?";
}

std::string ExecScope::str() const {
  if (kind == ScopeKind::cluster) return "cluster(" + std::to_string(ctas) + "x" + std::to_string(cta_threads()) + ")";
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
    case ScopeKind::cluster: return true;
  }
  return false;
}

}  // namespace tp
