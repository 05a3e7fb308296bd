#include "layout/placement.h"

#include "errors.h"
#include "layout/checked.h"

namespace tp {

namespace {
// Far past a thread's registers (dispatch/architecture.h): a tile needing more than 1024 slots
// per thread is a mistake (or wants batch_dims), and the placement tables stay small.
constexpr long long kMaxRegisterSlots = 1024;
constexpr long long kMaxTableEntries = 1ll << 22;
}  // namespace

// A layout's construction checked that its largest thread index fits in int64.
long long thread_of(const Position& pos) {
  long long t = 0;
  for (const auto& [axis, value] : pos) {
    if (is_thread_axis(axis)) t += value * thread_weight(axis);
  }
  return t;
}

RegisterPlacement place_in_registers(const TileLayout& layout, const ExecScope& scope,
                                     const std::string& arg) {
  for (Axis a : layout.thread_axes()) {
    if (!scope.offers(a)) {
      throw ValueError(arg + ": " + layout.str() + " uses thread axis " + axis_name(a) +
                       ", which " + scope.str() + " scope does not have" +
                       (scope.kind == ScopeKind::thread ? " (a thread holds its tile in its own registers)"
                                                        : ""));
    }
  }
  RegisterPlacement p;
  p.threads = scope.threads;
  const long long span = layout.span();
  if (span > kMaxRegisterSlots) {
    throw LimitError(arg + ": registers per thread: " + layout.str() + " needs " + std::to_string(span) +
                     " register slots per thread; the limit is " + std::to_string(kMaxRegisterSlots) +
                     " (split the tile with batch_dims)");
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
  for (long long e = 0; e < n; ++e) {
    bool first = true;
    for (const Position& pos : layout.positions(e)) {
      const long long m = pos.count(Axis::m) ? pos.at(Axis::m) : 0;
      const long long t = thread_of(pos);
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
  return p;
}

RunForm run_form(const RegisterPlacement& p) {
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

}  // namespace tp
