// The planner's register layout for a step that names none.
#include <numeric>

#include "errors.h"
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
// Whether the layout's iters split into the tile's dims (TileLayout::group takes them).
bool splits(const TileLayout& layout, const std::vector<long long>& shape) {
  try {
    layout.group(shape);
    return true;
  } catch (const ValueError&) {
    return false;
  }
}

// The threads over the dims from the innermost out, each dim taking the threads it and the ones
// left have in common (innermost in the dim: a warp's accesses stay contiguous) and holding the
// rest of itself as slots ((2, 3, 32) over 64 threads: threads 32 * a + c hold x[a, :, c]); none
// where the dims leave threads over.
std::optional<TileLayout> spread_by_dims(const std::vector<long long>& shape, long long t, Axis axis) {
  std::vector<Iter> inner_first;
  long long left = t, thread_stride = 1, slot_stride = 1;
  for (auto d = shape.rbegin(); d != shape.rend(); ++d) {
    const long long held = std::gcd(*d, left), slots = *d / held;
    if (held > 1) inner_first.push_back(Iter{held, thread_stride, axis});
    if (slots > 1) inner_first.push_back(Iter{slots, slot_stride, Axis::m});
    thread_stride *= held;
    slot_stride *= slots;
    left /= held;
  }
  if (left != 1) return std::nullopt;
  return TileLayout(std::vector<Iter>(inner_first.rbegin(), inner_first.rend()));
}
}  // namespace

// The longest run up to kRunElements that n is a whole number of, so that the batch's tiles, laid
// end to end, each start on a whole run. A run the tile's start cuts moves element by element at a
// stride of the run (tp::load_tile), a quarter or less of each sector a warp access touches used,
// and stores sectors in partial writes; runs of one element move a contiguous span per warp access
// whatever the start (rows of 50257 and 4097).
long long spread_run(long long n) {
  long long run = kRunElements;
  while (n % run != 0) run /= 2;
  return run;
}

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
  const long long run = spread_run(n);
  const TileLayout spread = slots * t == n ? even_spread(n, t, run, axis) : even_spread(slots * t, t, run, axis).padded_to(n);
  if (shape.size() == 1 || splits(spread, shape)) return spread;
  // a tile of several dims whose runs or blocks straddle its dims ((3, 64) over 64 threads: blocks
  // of 3; (4, 5, 64) over 32: runs of 4 a thread, 128 a warp, past a row of 64 into a dim of 5):
  // runs interleaved over the threads, the longest that split into the dims
  for (long long r = run; r >= 1; r /= 2) {
    if (n % (t * r) != 0 || n <= t * r) continue;
    const TileLayout interleaved = even_spread(n, t, r, axis);
    if (splits(interleaved, shape)) return interleaved;
  }
  if (const std::optional<TileLayout> by_dims = spread_by_dims(shape, t, axis)) return *by_dims;
  return spread;  // refused where it is used, with the dims it does not split into
}

}  // namespace tp
