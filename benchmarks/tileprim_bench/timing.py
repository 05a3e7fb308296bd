"""How a call is timed: wall clock for the CPU backend and NumPy, CUDA events for the GPU, and one
call at a time for small-call latency. Every timer warms up first and reports a median."""
from __future__ import annotations

import statistics
import time
from typing import Callable, Dict, List, Optional

# a measurement stops early (with at least MIN_SAMPLES) once it has run this long, so one very slow
# case cannot stall the whole run
BUDGET_S = 2.0
MIN_SAMPLES = 3


def _median_ms(sample: Callable[[], float], repeats: int, budget_s: Optional[float] = BUDGET_S) -> float:
    """The median of ``repeats`` samples, or of those taken within ``budget_s`` (None: all of them)."""
    deadline = time.perf_counter() + budget_s if budget_s is not None else None
    samples = []
    for _ in range(repeats):
        samples.append(sample())
        if deadline is not None and len(samples) >= MIN_SAMPLES and time.perf_counter() > deadline:
            break
    return statistics.median(samples)


class WallTimer:
    """Milliseconds per call by ``time.perf_counter``: ``warmup`` calls, then the median of
    ``repeats`` timed calls.

    Parameters
    ----------
    repeats : int
        How many calls are timed (fewer when they pass the time budget).
    warmup : int, default 2
        Untimed calls first.
    """

    def __init__(self, repeats: int, warmup: int = 2):
        self.repeats, self.warmup = repeats, warmup

    def __call__(self, fn: Callable[[], object]) -> float:
        for _ in range(self.warmup):
            fn()

        def one() -> float:
            start = time.perf_counter()
            fn()
            return (time.perf_counter() - start) * 1e3
        return _median_ms(one, self.repeats)

    def describe(self) -> str:
        return f"time.perf_counter around one call, {self.warmup} warm-up calls, median of {self.repeats}"


class CudaEventTimer:
    """Milliseconds per call by CUDA events (PyTorch's) around a batch of ``inner`` back-to-back
    calls on the current stream, so host overhead overlaps the GPU as in a real program:
    ``warmup`` calls, then the median over ``repeats`` batches.

    Parameters
    ----------
    torch : module
        PyTorch, for its events and synchronize.
    repeats : int
        How many batches are timed (fewer when they pass the time budget).
    inner : int
        Calls per batch.
    warmup : int, default 3
        Untimed calls first.
    budget_s : float or None, default BUDGET_S
        Stop after this long (with at least MIN_SAMPLES batches); None: always ``repeats``.
    """

    def __init__(self, torch, repeats: int, inner: int, warmup: int = 3,
                 budget_s: Optional[float] = BUDGET_S):
        self.torch, self.repeats, self.inner, self.warmup = torch, repeats, inner, warmup
        self.budget_s = budget_s

    def __call__(self, fn: Callable[[], object]) -> float:
        cuda = self.torch.cuda
        for _ in range(self.warmup):
            fn()
        cuda.synchronize()

        def batch() -> float:
            start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            start.record()
            for _ in range(self.inner):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / self.inner
        return _median_ms(batch, self.repeats, self.budget_s)

    def describe(self) -> str:
        return (f"CUDA events around {self.inner} back-to-back calls, {self.warmup} warm-up calls, "
                f"median of {self.repeats} batches")


class HostWallTimer:
    """Milliseconds per call of host wall time: ``time.perf_counter`` around ``inner`` back-to-back
    calls and one ``sync()`` after them, ``warmup`` calls first, the median over ``repeats``
    batches. For small calls, where what the host spends per call is the cost.

    Parameters
    ----------
    sync : callable
        Waits for the device (``torch.cuda.synchronize``; a no-op on the CPU).
    repeats, inner, warmup : int
    """

    def __init__(self, sync: Callable[[], None], repeats: int, inner: int, warmup: int = 20):
        self.sync, self.repeats, self.inner, self.warmup = sync, repeats, inner, warmup

    def __call__(self, fn: Callable[[], object]) -> float:
        for _ in range(self.warmup):
            fn()
        self.sync()

        def batch() -> float:
            start = time.perf_counter()
            for _ in range(self.inner):
                fn()
            self.sync()
            return (time.perf_counter() - start) * 1e3 / self.inner
        return _median_ms(batch, self.repeats, None)

    def describe(self) -> str:
        return (f"time.perf_counter around {self.inner} back-to-back calls and one synchronize, "
                f"{self.warmup} warm-up calls, median of {self.repeats} batches")


def per_call_ms(fn: Callable[[], object], calls: int, sync: Optional[Callable[[], None]] = None,
                warmup: int = 50) -> float:
    """Median milliseconds of one ``fn()`` (then ``sync()``, where given) over ``calls`` calls,
    each timed alone, after ``warmup`` untimed ones: what a small repeated call costs.

    Parameters
    ----------
    fn : callable
    calls : int
    sync : callable, optional
        Called after each call, inside the timing (e.g. a stream synchronize).
    warmup : int, default 50

    Returns
    -------
    float
    """
    return side_by_side_ms({"": fn}, calls, sync, warmup)[""]


def side_by_side_ms(fns: Dict[str, Callable[[], object]], calls: int, sync: Optional[Callable[[], None]] = None,
                    warmup: int = 50) -> Dict[str, float]:
    """``per_call_ms`` of each of ``fns``, their calls taken in turn (a, b, a, b, ...): a busy or
    drifting machine slows them alike, so their ratio holds where back-to-back runs disagree."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    if sync:
        sync()
    samples: Dict[str, List[float]] = {name: [] for name in fns}
    for _ in range(calls):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            if sync:
                sync()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(s) * 1e3 for name, s in samples.items()}
