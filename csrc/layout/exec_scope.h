// Exec scopes: the set of threads that runs one instance of a primitive on one tile, and
// the thread axes a layout may use at that scope.
#pragma once
#include <string>
#include <vector>

#include "layout/axis.h"

namespace tp {

// cluster: a Hopper thread-block cluster of `ctas` CTAs acting as ONE instance of ctas * threads
// lanes (lane = the CTA's rank in the cluster * its threads + its thread index); an extension of
// DESIGN's scope ladder past the CTA, for rows one CTA cannot hold.
enum class ScopeKind { thread, warp, warpgroup, cta, cluster };

struct ExecScope {
  // A CTA holds 1 to this many threads (a block's most on every architecture); the other kinds
  // have a fixed count (fixed_threads).
  static constexpr int kMaxCtaThreads = 1024;
  static constexpr int kMaxClusterCtas = 16;  // 8 portable; 16 where the target allows it

  ScopeKind kind = ScopeKind::thread;
  int threads = 1;  // the instance's lanes (a cluster's: ctas * cta_threads())
  int ctas = 1;     // CTAs of one instance (> 1 only for a cluster)

  static ExecScope thread() { return {ScopeKind::thread, fixed_threads(ScopeKind::thread)}; }
  static ExecScope warp() { return {ScopeKind::warp, fixed_threads(ScopeKind::warp)}; }
  static ExecScope warpgroup() { return {ScopeKind::warpgroup, fixed_threads(ScopeKind::warpgroup)}; }
  static ExecScope cta(int threads);  // 1..1024, else ValueError
  // ctas in {2, 4, 8, 16} of cta_threads each (whole warps, <= 1024), else ValueError
  static ExecScope cluster(int ctas, int cta_threads);
  // "thread", "warp", "warpgroup", "cta" (with its thread count) or "cluster" (with its lanes,
  // ctas * threads per CTA, and its ctas); ValueError otherwise.
  static ExecScope named(const std::string& kind, int threads, int ctas = 1);

  // thread 1, warp 32, warpgroup 128; cta 0 (any count from 1 to kMaxCtaThreads)
  static int fixed_threads(ScopeKind kind);
  static const std::vector<ScopeKind>& kinds();  // every kind, smallest first

  // The threads of one CTA of the instance (a cluster's share; every other scope's own count):
  // registers per thread and shared memory are limits per CTA.
  int cta_threads() const { return threads / ctas; }
  // A CTA or a cluster: the kinds whose instance is whole blocks, staging in shared memory.
  bool whole_blocks() const { return kind == ScopeKind::cta || kind == ScopeKind::cluster; }

  std::string kind_name() const;  // "thread", "warp", "warpgroup", "cta", "cluster"
  std::string str() const;        // "warp", "cta(48)", "cluster(4x256)"
  // thread: none; warp: laneid; warpgroup: laneid, wid_in_wg, tid_in_wg; cta, cluster: all of them
  bool offers(Axis a) const;
  bool operator==(const ExecScope& o) const { return kind == o.kind && threads == o.threads && ctas == o.ctas; }
};

}  // namespace tp
