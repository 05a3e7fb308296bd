"""Opt-in autotuning of the planner's scope on the GPU a call runs on (issue 49's extra), for
programs and batched standalone calls alike. Where no scope (and no staging) is named and the call's
arrays are a GPU's (a library's device arrays, not NumPy's), the cost model's best few candidates
(the plan's ``scope_trace``; ``candidates``) are each run on the call's own arrays and timed, and the
fastest is kept: in memory, and on disk beside the kernel cache (``autotune.json``), keyed by the
call (a program's trace, a standalone op's operands and options), its tile count, the GPU's name and
the driver, so that the next process plans it without timing. The choice is this GPU's, so the CPU
backend (which plans the model's choice) gives the same bits only at the point the plan names. Off
unless ``tp.program(autotune=True)`` or ``TILEPRIM_AUTOTUNE=1`` (standalone calls: the variable)."""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import tempfile
import time
import warnings
from typing import Callable, List, Optional

import tileprim._C as _C
from .._version import __version__

__all__ = ["requested", "candidates", "gpu_of", "tuned", "tuned_spec", "described", "forget", "with_scope",
           "scope_parts", "run_seconds", "seconds"]

_CANDIDATES = 4  # the model's best few: its ranking is within a few % of the sweep's on most shapes
_WITHIN = 2.0  # and the best of each other scope it scores within this factor of its best
_MIN_SECONDS = 0.02  # each candidate timed over at least this long (and at least _MIN_RUNS runs)
_MIN_RUNS = 3
_FILE = "autotune.json"
_MOST_BYTES = 16 << 20
_REMEMBERED: dict = {}  # key -> {"call", "gpu", "scope", "staging", "ms": {point: ms}}
_SPEC_KIND, _SPEC_THREADS, _SPEC_STAGING, _SPEC_CTAS = 4, 5, 7, 12  # in _C.plan_program's arguments


def requested(flag: Optional[bool]) -> bool:
    """The program's autotune= if it says, else TILEPRIM_AUTOTUNE=1 ('0' or unset: off; any other
    value is refused, as autotune='yes' is, rather than read as off)."""
    if flag is not None:
        return flag
    value = os.environ.get("TILEPRIM_AUTOTUNE", "")
    if value not in ("", "0", "1"):
        raise ValueError(f"TILEPRIM_AUTOTUNE: {value!r} is not '1' (on) or '0' (off)")
    return value == "1"


def scope_parts(scope: str) -> tuple:
    """(kind, threads, ctas) of a scope as the plan names it: thread, warp, warpgroup, cta(N), cluster(CxT)."""
    fixed = {"thread": ("thread", 1, 1), "warp": ("warp", 32, 1), "warpgroup": ("warpgroup", 128, 1)}
    if scope in fixed:
        return fixed[scope]
    m = re.fullmatch(r"cta\((\d+)\)", scope)
    if m:
        return ("cta", int(m.group(1)), 1)
    m = re.fullmatch(r"cluster\((\d+)x(\d+)\)", scope)
    if m:
        return ("cluster", int(m.group(1)) * int(m.group(2)), int(m.group(1)))
    raise ValueError(f"autotune: cannot read the scope {scope!r}")


def candidates(scope_trace: List[dict]) -> List[tuple]:
    """The points timed, best-scored first: the model's best few, and the best-scored staging of
    every other scope the model scores within _WITHIN of its best (its error between scopes is
    larger than between stagings of one scope: cross-entropy at 128256, bfloat16, ranks cta(512)
    tenth at 1.4x its best, and runs it fastest on an H200). Spilled points are left out, and a
    point that is another's kernel under a second name (cta(128), a warpgroup) is timed once."""
    scored = sorted((v for v in scope_trace if v["accepted"] and v["staging"] != "spilled"),
                    key=lambda v: v["ns_per_row"])
    if not scored:
        return []
    out, kernels, scopes = [], set(), set()
    for rank, v in enumerate(scored):
        _, threads, ctas = scope_parts(v["scope"])
        near = v["ns_per_row"] <= _WITHIN * scored[0]["ns_per_row"]
        kept = rank < _CANDIDATES or ((threads, ctas) not in scopes and near)
        if kept and (threads, ctas, v["staging"]) not in kernels:
            kernels.add((threads, ctas, v["staging"]))
            scopes.add((threads, ctas))
            out.append((v["scope"], v["staging"]))
    return out


def _key(call: tuple, tiles: int, gpu: str) -> str:
    return hashlib.sha256(repr((__version__, gpu, tiles, call)).encode()).hexdigest()


def _path() -> Optional[str]:
    if not _C.cuda.cache_disk_enabled():
        return None
    return os.path.join(_C.cuda.cache_directory(), _FILE)


def _load() -> dict:
    """The table on disk; {} where there is none, or where the path is not a regular file of at most
    _MOST_BYTES (opened without following links and without blocking, as the kernel cache reads its
    entries), or does not parse: such a table is timed again and written over."""
    path = _path()
    if path is None:
        return {}
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return {}
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MOST_BYTES:
            return {}
        with os.fdopen(fd, "rb") as f:
            fd = -1
            table = json.loads(f.read())
        return table if isinstance(table, dict) else {}
    except (OSError, ValueError):
        return {}
    finally:
        if fd >= 0:
            os.close(fd)


def _store(key: str, entry: dict) -> None:
    """The table on disk with this entry: written to a temp file and renamed over it (a reader sees
    the old table or the new one); where that fails, one warning and nothing left behind."""
    path = _path()
    if path is None:
        return
    table = _load()
    table[key] = entry
    temp = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".autotune.")
        with os.fdopen(fd, "w") as f:
            json.dump(table, f)
        os.replace(temp, path)
    except OSError as e:
        if temp is not None and os.path.exists(temp):
            os.remove(temp)
        warnings.warn(f"tileprim autotune: the choice is kept in memory only ({e})", RuntimeWarning, stacklevel=3)


def _shown(points: list, title: str):
    """The points, with a progress bar where tqdm is installed and the output is a terminal or a
    notebook (each candidate compiles a kernel: seconds each on a laptop's CPU)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return points
    return tqdm(points, desc=title, unit="candidate", leave=False, disable=None)


def gpu_of(device: int) -> str:
    """The GPU and driver a choice is kept for."""
    return f"{_C.cuda.device_info(device)['name']} (driver {_C.cuda.driver_version()})"


def _point(scope: str, staging: str) -> str:
    return f"{scope} {staging}" if staging else scope


def tuned(call: tuple, shown: str, points: List[tuple], tiles: int, gpu: str,
          seconds_of: Callable[[str, str], float]) -> dict:
    """The record of the point (scope, staging) measured fastest on ``gpu`` for ``call`` (plain values
    that decide the plan, bar the scope; ``shown`` names it in the table): remembered, else each of
    ``points`` timed by ``seconds_of(scope, staging)`` (staging "": the planner's at that scope)."""
    key = _key(call, tiles, gpu)
    entry = _REMEMBERED.get(key)
    source = "remembered"
    if entry is None:
        entry = _load().get(key)
        source = "remembered on disk"
    if entry is None:
        ms, failed = {}, {}
        for scope, staging in _shown(points, f"tileprim autotune {shown.split(':')[0]}"):
            point = _point(scope, staging)
            try:
                ms[point] = seconds_of(scope, staging) * 1e3
            except RuntimeError as e:  # a kernel this GPU will not compile or launch: the others decide
                failed[point] = e
        if not ms:
            raise next(iter(failed.values()))
        scope, _, staging = min(ms, key=ms.get).partition(" ")
        entry = {"call": shown, "gpu": gpu, "scope": scope, "staging": staging, "ms": ms}
        if failed:
            entry["failed"] = {point: str(e).splitlines()[0] for point, e in failed.items()}
        _store(key, entry)
        source = "measured"
    _REMEMBERED[key] = entry
    return {**entry, "gpu": gpu, "source": source}


def tuned_spec(spec: tuple, scope_trace: List[dict], tiles: int, gpu: str,
               seconds_of: Callable[[tuple], float]) -> tuple:
    """(spec, record): a program's ``spec`` (``_C.plan_program``'s arguments) at the scope and staging
    measured fastest on ``gpu`` (``tuned``), each candidate timed by ``seconds_of(candidate spec)``."""
    tile = ", ".join(f"{name} {dtype}{tuple(shape)}" for name, dtype, shape, _ in spec[1])
    record = tuned(with_scope(spec, "", ""), f"{spec[0]}: {tiles} x {tile}", candidates(scope_trace), tiles, gpu,
                   lambda scope, staging: seconds_of(with_scope(spec, scope, staging)))
    return with_scope(spec, record["scope"], record["staging"]), record


def described(record: dict) -> str:
    """The plan's last line for an autotuned call: what was kept, and every candidate's time."""
    times = ", ".join([f"{point} {ms:.3f} ms" for point, ms in record["ms"].items()] +
                      [f"{point} failed ({why})" for point, why in record.get("failed", {}).items()])
    kept = _point(record["scope"], record["staging"])
    return (f"autotuned on {record['gpu']} ({record['source']}): {kept} kept, the fastest of the cost model's "
            f"best candidates ({times})")


def forget(disk: bool = True) -> None:
    """Every choice forgotten (``tileprim.cache.clear``): in memory, and on disk unless disk=False."""
    _REMEMBERED.clear()
    path = _path() if disk else None
    if path is not None and os.path.isfile(path):
        os.remove(path)


def with_scope(spec: tuple, scope: str, staging: str) -> tuple:
    """``spec`` at this scope ("": none named) and staging."""
    kind, threads, ctas = scope_parts(scope) if scope else ("", 0, 1)
    out = list(spec)
    out[_SPEC_KIND], out[_SPEC_THREADS], out[_SPEC_CTAS], out[_SPEC_STAGING] = kind, threads, ctas, staging
    return tuple(out)


def run_seconds(prepared, values, adapter, device: int) -> float:
    """``seconds`` of a prepared call on the call's own ``values``, on the stream of its GPU."""
    return seconds(lambda: prepared.run(values, None),
                   lambda: _C.cuda.synchronize(adapter.stream(device), device))


def seconds(run: Callable[[], None], synchronize: Callable[[], None]) -> float:
    """The median time of ``run`` after one run that compiles and warms it."""
    run()
    synchronize()
    times = []
    start = time.perf_counter()
    while len(times) < _MIN_RUNS or time.perf_counter() - start < _MIN_SECONDS:
        t = time.perf_counter()
        run()
        synchronize()
        times.append(time.perf_counter() - t)
        if len(times) >= 200:
            break
    return sorted(times)[len(times) // 2]
