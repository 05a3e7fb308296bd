// The planner's register layout for a step that names none.
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

// The run for tiles of n elements: the longest up to kRunElements that n is a whole number of, so
// that the batch's tiles, laid end to end, each start on a whole run. A run the tile's start cuts
// moves element by element at a stride of the run (tp::load_tile), a quarter or less of each
// sector a warp access touches used, and stores sectors in partial writes; runs of one element
// move a contiguous span per warp access whatever the start (rows of 50257 and 4097).
long long run_elements(long long n) {
  long long run = kRunElements;
  while (n % run != 0) run /= 2;
  return run;
}

// n elements (a multiple of the t threads) over the threads: runs interleaved (thread i's k-th
// run starts at (k * t + i) * run) where each thread holds whole runs and more than one, else
// (one run or less each) a block of n / t consecutive elements per thread.
TileLayout even_spread(long long n, long long t, long long run, Axis axis) {
  if (n % (t * run) == 0 && n > t * run) {
    if (run == 1) return TileLayout({Iter{n / t, 1, Axis::m}, Iter{t, 1, axis}});
    return TileLayout({Iter{n / (t * run), run, Axis::m}, Iter{t, 1, axis}, Iter{run, 1, Axis::m}});
  }
  std::vector<Iter> shard = {Iter{t, 1, axis}};
  if (n / t > 1) shard.push_back(Iter{n / t, 1, Axis::m});
  return TileLayout(shard);
}
}  // namespace

std::optional<TileLayout> spread_layout(const std::vector<long long>& shape, const ExecScope& scope) {
  if (scope.threads == 1) return std::nullopt;
  long long n = 1;
  for (long long d : shape) n *= d;
  const long long t = scope.threads;
  const Axis axis = thread_axis(scope);
  if (n == 1) return TileLayout({Iter{1, 1, Axis::m}}, {Iter{t, 1, axis}});  // every thread its own copy
  // ceil(n / t) slots each, in whole runs past one run, so that a warp's loads stay contiguous
  // (a tile the threads divide but their runs do not, 32000 over 256 threads, is padded like a
  // ragged one, never given as a block of consecutive elements per thread, whose loads a warp
  // spreads over 32 lines); the slots past its end hold nothing. Past one run the slots are a
  // multiple of kRunElements whatever the run, so that a row taken in passes has chunks of a few
  // slots to divide it (rows of 4097 at cta(256): 20 slots, not 17)
  long long slots = (n + t - 1) / t;
  if (slots > kRunElements) slots = (slots + kRunElements - 1) / kRunElements * kRunElements;
  const long long run = run_elements(n);
  if (slots * t == n) return even_spread(n, t, run, axis);
  return even_spread(slots * t, t, run, axis).padded_to(n);
}

}  // namespace tp
