// Exec scopes: the set of threads that runs one instance of a primitive on one tile, and
// the thread axes a layout may use at that scope.
#pragma once
#include <string>
#include <vector>

#include "layout/axis.h"

namespace tp {

enum class ScopeKind { thread, warp, warpgroup, cta };

struct ExecScope {
  // A CTA holds 1 to this many threads (a block's most on every architecture); the other kinds
  // have a fixed count (fixed_threads).
  static constexpr int kMaxCtaThreads = 1024;

  ScopeKind kind = ScopeKind::thread;
  int threads = 1;

  static ExecScope thread() { return {ScopeKind::thread, fixed_threads(ScopeKind::thread)}; }
  static ExecScope warp() { return {ScopeKind::warp, fixed_threads(ScopeKind::warp)}; }
  static ExecScope warpgroup() { return {ScopeKind::warpgroup, fixed_threads(ScopeKind::warpgroup)}; }
  static ExecScope cta(int threads);  // 1..1024, else ValueError
  // "thread", "warp", "warpgroup" or "cta" (with its thread count); ValueError otherwise.
  static ExecScope named(const std::string& kind, int threads);

  // thread 1, warp 32, warpgroup 128; cta 0 (any count from 1 to kMaxCtaThreads)
  static int fixed_threads(ScopeKind kind);
  static const std::vector<ScopeKind>& kinds();  // every kind, smallest first

  std::string kind_name() const;  // "thread", "warp", "warpgroup", "cta"
  std::string str() const;        // "warp", "cta(48)"
  // thread: none; warp: laneid; warpgroup: laneid, wid_in_wg, tid_in_wg; cta: all of them
  bool offers(Axis a) const;
  bool operator==(const ExecScope& o) const { return kind == o.kind && threads == o.threads; }
};

}  // namespace tp
