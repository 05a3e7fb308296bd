// Exec scopes: the set of threads that runs one instance of a primitive on one tile, and
// the thread axes a layout may use at that scope.
#pragma once
#include <string>

#include "layout/axis.h"

namespace tp {

enum class ScopeKind { thread, warp, warpgroup, cta };

struct ExecScope {
  ScopeKind kind = ScopeKind::thread;
  int threads = 1;

  static ExecScope thread() { return {ScopeKind::thread, 1}; }
  static ExecScope warp() { return {ScopeKind::warp, 32}; }
  static ExecScope warpgroup() { return {ScopeKind::warpgroup, 128}; }
  static ExecScope cta(int threads);  // 1..1024, else ValueError
  // "thread", "warp", "warpgroup" or "cta" (with its thread count); ValueError otherwise.
  static ExecScope named(const std::string& kind, int threads);

  std::string kind_name() const;  // "thread", "warp", "warpgroup", "cta"
  std::string str() const;        // "warp", "cta(48)"
  // thread: none; warp: laneid; warpgroup: laneid, wid_in_wg, tid_in_wg; cta: all of them
  bool offers(Axis a) const;
  bool operator==(const ExecScope& o) const { return kind == o.kind && threads == o.threads; }
};

}  // namespace tp
