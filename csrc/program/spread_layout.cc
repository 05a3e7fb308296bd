// The planner's register layout for a step that names none.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "program/program_plan.h"

namespace tp {

namespace {
Axis thread_axis(const ExecScope& scope) {
  switch (scope.kind) {
    case ScopeKind::warp: return Axis::laneid;
    case ScopeKind::warpgroup: return Axis::tid_in_wg;
    default: return Axis::tx;
  }
}
// Elements a thread holds side by side in each run of a spread layout: a warp's threads then
// move one contiguous span per access (16 bytes each in float32).
constexpr long long kRunElements = 4;
// The CTAs a hint names: at least a warp, at most a block
constexpr long long kHintMinThreads = 32, kHintMaxThreads = 1024;
}  // namespace

std::optional<TileLayout> spread_layout(const std::vector<long long>& shape, const ExecScope& scope) {
  if (scope.threads == 1) return std::nullopt;
  long long n = 1;
  for (long long d : shape) n *= d;
  const long long t = scope.threads;
  const long long g = std::gcd(n, t);
  const Axis axis = thread_axis(scope);
  std::vector<Iter> shard;
  if (g == t && n % (t * kRunElements) == 0 && n > t * kRunElements) {
    // runs of kRunElements interleaved over the threads: thread i's k-th run starts at
    // (k * threads + i) * kRunElements
    shard = {Iter{n / (t * kRunElements), kRunElements, Axis::m}, Iter{t, 1, axis}, Iter{kRunElements, 1, Axis::m}};
    return TileLayout(shard, {});
  }
  if (g > 1) shard.push_back(Iter{g, 1, axis});
  if (n / g > 1 || shard.empty()) shard.push_back(Iter{n / g, 1, Axis::m});
  std::vector<Iter> replica;
  if (t / g > 1) replica.push_back(Iter{t / g, g, axis});
  return TileLayout(shard, replica);
}

std::string dividing_scopes(long long n, const ExecScope& scope) {
  const long long t = scope.threads;
  if (t == 1 || n % t == 0) return "";
  std::vector<long long> fit;
  for (long long d = kHintMinThreads; d <= std::min(n, kHintMaxThreads); ++d) {
    if (n % d == 0) fit.push_back(d);
  }
  const std::string row = "a tile of " + std::to_string(n) + " elements";
  if (fit.empty()) {
    return "no CTA of " + std::to_string(kHintMinThreads) + " to " + std::to_string(kHintMaxThreads) +
           " threads divides " + row;
  }
  // the nearest to the scope's thread count, by ratio
  std::stable_sort(fit.begin(), fit.end(), [&](long long a, long long b) {
    return std::abs(std::log(double(a) / t)) < std::abs(std::log(double(b) / t));
  });
  std::string named = "tp.cta(" + std::to_string(fit[0]) + ")";
  if (fit.size() > 1) named += " or tp.cta(" + std::to_string(fit[1]) + ")";
  return "a CTA whose threads divide " + row + " spreads it with no replicas: " + named;
}

}  // namespace tp
