#include "layout/placement.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include "errors.h"
#include "layout/checked.h"

namespace tp {

namespace {
// Far past a thread's registers (dispatch/architecture.h): a tile needing more than 1024 slots
// per thread is a mistake (or wants batch_dims), and the placement tables stay small.
constexpr long long kMaxRegisterSlots = 1024;
constexpr long long kMaxTableEntries = 1ll << 22;

// A position as a placement sees it: its register (before the swizzle) and its thread. A row of
// 2^18 elements is placed at every candidate scope, so the places are sums of per-iter steps, not
// TileLayout::positions' maps (the same places, in the same order).
struct Place {
  long long m = 0, thread = 0;
};

Place step(Axis axis, long long value) {
  return axis == Axis::m ? Place{value, 0} : Place{0, value * thread_weight(axis)};
}

// Every replica's shift, in TileLayout::positions' order (the first replica iter outermost).
std::vector<Place> replica_shifts(const TileLayout& layout) {
  std::vector<Place> shifts = {Place{}};
  shifts.reserve(static_cast<size_t>(layout.copies()));
  for (const Iter& r : layout.replica()) {
    std::vector<Place> next;
    next.reserve(shifts.size() * static_cast<size_t>(r.extent));
    for (const Place& p : shifts) {
      for (long long i = 0; i < r.extent; ++i) {
        const Place s = step(r.axis, i * r.stride);
        next.push_back({p.m + s.m, p.thread + s.thread});
      }
    }
    shifts.swap(next);
  }
  return shifts;
}

// The next flat index's place: the shard's digits advance like an odometer (the last iter
// fastest), with no division per element.
void advance(const std::vector<Iter>& shard, std::vector<long long>& digits, Place& at) {
  for (size_t k = shard.size(); k-- > 0;) {
    const Place s = step(shard[k].axis, shard[k].stride);
    if (++digits[k] < shard[k].extent) {
      at = {at.m + s.m, at.thread + s.thread};
      return;
    }
    digits[k] = 0;
    at = {at.m - s.m * (shard[k].extent - 1), at.thread - s.thread * (shard[k].extent - 1)};
  }
}

bool names_memory(const TileLayout& layout) {
  for (const std::vector<Iter>* iters : {&layout.shard(), &layout.replica()}) {
    for (const Iter& it : *iters) {
      if (it.axis == Axis::m) return true;
    }
  }
  return layout.offset().count(Axis::m) > 0;
}

// The closed form that matches the tables, the widest vec first: tried once per placement.
RunForm run_form_of(const RegisterPlacement& p) {
  const int T = p.threads, S = p.slots;
  int elements = 0;
  for (int e : p.store) elements += e >= 0 ? 1 : 0;
  int leading = 0;  // lanes that write slot 0 back, in order: the owners of a replicated tile
  while (leading < T && p.store[static_cast<size_t>(leading)] >= 0) ++leading;
  // every lane an owner, slots past the elements empty (a padded tile), else the leading owners
  for (const int owners : {T, leading}) {
    if (owners == 0) continue;
    for (int vec = S; vec >= 1; --vec) {
      if (S % vec != 0) continue;
      bool ok = true;
      for (int s = 0; s < S && ok; ++s) {
        for (int t = 0; t < T && ok; ++t) {
          int e = ((s / vec) * owners + t % owners) * vec + s % vec;
          if (e >= elements) e = -1;
          const size_t at = static_cast<size_t>(s) * T + t;
          ok = p.load[at] == e && p.store[at] == (t < owners ? e : -1);
        }
      }
      if (ok) return {owners, vec, static_cast<long long>(owners) * S > elements ? elements : 0};
    }
  }
  return {};
}

void check_thread_axes(const TileLayout& layout, const ExecScope& scope, const std::string& arg) {
  for (Axis a : layout.thread_axes()) {
    if (!scope.offers(a)) {
      throw ValueError(arg + ": " + layout.str() + " uses thread axis " + axis_name(a) +
                       ", which " + scope.str() + " scope does not have" +
                       (scope.kind == ScopeKind::thread ? " (a thread holds its tile in its own registers)"
                                                        : ""));
    }
  }
}

// The tables of a layout whose thread axes the scope offers: they depend on the scope's threads alone.
RegisterPlacement placed(const TileLayout& layout, const ExecScope& scope, const std::string& arg) {
  RegisterPlacement p;
  p.threads = scope.threads;
  const long long span = layout.span();
  if (span > kMaxRegisterSlots) {
    // a scope of several threads whose layout names none of them holds the tile whole on each thread
    const bool whole_on_each = scope.threads > 1 && layout.thread_axes().empty();
    throw LimitError(arg + ": registers per thread: " + layout.str() + " needs " + std::to_string(span) +
                     " register slots per thread; the limit is " + std::to_string(kMaxRegisterSlots) +
                     (whole_on_each ? " (the layout names no thread axis of " + scope.str() +
                                          ", so each thread would hold the whole tile: name a layout that spreads "
                                          "it over the threads, or no scope with batch_dims for the planner's)"
                                    : " (split the tile with batch_dims; with batch_dims and no scope named the "
                                      "planner spreads each tile over a scope's threads)"));
  }
  long long entries = 0;
  if (!checked_mul(span, scope.threads, entries) || entries > kMaxTableEntries) {
    throw LimitError(arg + ": " + layout.str() + " at " + scope.str() + " scope needs a placement table of " +
                     std::to_string(span) + " slots x " + std::to_string(scope.threads) +
                     " threads; the limit is " + int_str(kMaxTableEntries) + " entries");
  }
  p.slots = static_cast<int>(span);
  p.load.assign(static_cast<size_t>(p.slots) * p.threads, -1);
  p.store.assign(p.load.size(), -1);
  p.thread_private = !layout.has_thread_axes() && scope.threads > 1;

  const long long n = layout.elements();  // a padded layout's slots past them hold nothing
  const std::vector<Place> shifts = replica_shifts(layout);
  const bool swizzled = names_memory(layout);  // TileLayout::positions swizzles a named m only
  Place origin;
  for (const auto& [axis, value] : layout.offset()) {
    const Place s = step(axis, value);
    origin = {origin.m + s.m, origin.thread + s.thread};
  }
  std::vector<long long> digits(layout.shard().size(), 0);
  Place at = origin;
  for (long long e = 0; e < n; ++e, advance(layout.shard(), digits, at)) {
    bool first = true;
    for (const Place& shift : shifts) {
      const long long unswizzled = at.m + shift.m;
      const long long m = swizzled ? swizzle_address(unswizzled, layout.swizzle()) : unswizzled;
      const long long t = at.thread + shift.thread;
      if (t >= scope.threads) {
        throw ValueError(arg + ": " + layout.str() + " puts element " + std::to_string(e) +
                         " on thread " + std::to_string(t) + " but " + scope.str() +
                         " scope has " + std::to_string(scope.threads) + " threads");
      }
      const long long t_begin = p.thread_private ? 0 : t;
      const long long t_end = p.thread_private ? scope.threads : t + 1;
      for (long long th = t_begin; th < t_end; ++th) {
        int& slot = p.load[static_cast<size_t>(m) * p.threads + th];
        // A slot is filled once, even by the same element: that bounds this loop by the table
        // size whatever the replicas are.
        if (slot >= 0) {
          const std::string what = slot == e
                                       ? "element " + std::to_string(e) + " twice (its replicas coincide)"
                                       : "elements " + std::to_string(slot) + " and " + std::to_string(e);
          throw ValueError(arg + ": " + layout.str() + " puts " + what + " in register " + std::to_string(m) +
                           " of thread " + std::to_string(th) + "; each register holds one element once");
        }
        slot = static_cast<int>(e);
      }
      if (first) p.store[static_cast<size_t>(m) * p.threads + t] = static_cast<int>(e);
      first = false;
    }
  }
  p.run = run_form_of(p);
  return p;
}

// The placements made last: a plan places a tile for its step, its memory and its staging, and
// the planner plans each candidate scope, so a long row's layout recurs (at scopes of as many
// threads too: cta(512) and cluster(2x256) place it alike). A few tables, at most
// kMaxTableEntries entries in all; refusals are not kept (their errors name the argument).
class RecentPlacements {
 public:
  std::shared_ptr<const RegisterPlacement> find(const TileLayout& layout, int threads) {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto k = kept_.begin(); k != kept_.end(); ++k) {
      if (k->threads == threads && k->layout == layout) {
        std::rotate(kept_.begin(), k, k + 1);  // the newest use first
        return kept_.front().placement;
      }
    }
    return nullptr;
  }

  void keep(const TileLayout& layout, std::shared_ptr<const RegisterPlacement> placement) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const int threads = placement->threads;
    kept_.insert(kept_.begin(), Kept{layout, threads, std::move(placement)});
    long long total = 0;
    for (size_t i = 0; i < kept_.size(); ++i) {
      total += static_cast<long long>(kept_[i].placement->load.size());
      if (i >= kKept || (i > 0 && total > kMaxTableEntries)) {
        kept_.erase(kept_.begin() + static_cast<long>(i), kept_.end());
        break;
      }
    }
  }

 private:
  static constexpr size_t kKept = 4;
  struct Kept {
    TileLayout layout;
    int threads;
    std::shared_ptr<const RegisterPlacement> placement;
  };
  std::mutex mutex_;
  std::vector<Kept> kept_;  // the latest used first
};

}  // namespace

bool RegisterPlacement::whole_in_every_thread(long long elements) const {
  if (slots != elements) return false;
  for (int s = 0; s < slots; ++s) {
    for (int t = 0; t < threads; ++t) {
      if (element_at(t, s) != s) return false;
    }
  }
  return true;
}

std::shared_ptr<const RegisterPlacement> place_in_registers(const TileLayout& layout, const ExecScope& scope,
                                                            const std::string& arg) {
  static RecentPlacements recent;
  check_thread_axes(layout, scope, arg);
  if (auto kept = recent.find(layout, scope.threads)) return kept;
  auto placement = std::make_shared<const RegisterPlacement>(placed(layout, scope, arg));
  recent.keep(layout, placement);
  return placement;
}

}  // namespace tp
