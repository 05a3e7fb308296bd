"""Running a suite: its cases measured one by one, a line of the table per case on stdout under a
progress display on stderr, and the JSON of the run; what the whole suite (``suite``) and the
tile-program benchmark (``programs.suite``) share."""
from __future__ import annotations

import datetime
import platform
import shlex
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterable, List, Optional

import tileprim as tp

from . import report
from .cases import Case, Inputs
from .progress import open_progress

__all__ = ["Sizes", "Suite", "cuda_usable", "selected", "run", "run_as_asked"]


@dataclass(frozen=True)
class Sizes:
    """How big and how often: elements per input, timed repeats, calls per CUDA-event batch
    (GPU only), and calls per small-call median."""

    elements: int
    repeats: int
    inner: int
    calls: int


@dataclass
class Suite:
    """The cases of one backend, with what they share: the baseline library, the timer, the
    sizes, the inputs alive at the moment, and what the run's header adds about the cases."""

    backend: str
    quick: bool
    lib: object
    timer: object
    sizes: Sizes
    inputs: Inputs
    cases: List[Case]
    header: dict = field(default_factory=dict)


def cuda_usable() -> bool:
    return tp.info()["backends"]["cuda"] == "available"


def selected(cases: List[Case], only: Iterable[str]) -> List[Case]:
    only = list(only)
    return [case for case in cases if not only or any(text in case.name for text in only)]


def _header(s: Suite, only: List[str]) -> dict:
    return {"tileprim": tp.__version__, "python": platform.python_version(), "versions": s.lib.versions(),
            "device": s.lib.device(), "backend": s.backend, "command": shlex.join(sys.argv),
            "options": {"backend": s.backend, "quick": s.quick, "only": only},
            "elements_per_input": s.sizes.elements, "repeats": s.sizes.repeats,
            "timing": s.timer.describe(),
            "small_call_timing": f"time.perf_counter around one call, median of {s.sizes.calls} calls; "
                                 "tileprim and its baseline called in turn",
            "ratio": report.RATIO, "started": datetime.datetime.now().isoformat(timespec="seconds"),
            **s.header}


def run(s: Suite, only: Iterable[str] = (), json_path: Optional[str] = None) -> dict:
    """Measures the suite's cases (those whose name contains one of ``only``, if given), printing
    one line per case on stdout under a progress display on stderr.

    Parameters
    ----------
    s : Suite
        From :func:`suite`.
    only : iterable of str, optional
        Substrings of case names (``"sum K=32 "``, ``"cta(128)"``, ``"float16"``, ``"small"``).
    json_path : str, optional
        Where to write ``{"header": ..., "rows": [...]}``.

    Returns
    -------
    dict
        ``{"header": ..., "rows": [...]}``: one row per case, with ``tileprim_ms``, ``baselines``
        (name -> ms), GB/s, ``ratios`` (tileprim_ms / each baseline's ms) and ``ratio`` (to the
        fastest baseline); a case that could not run has null times and the reason in ``note``.

    Raises
    ------
    ValueError
        ``only`` matches no case.
    """
    only = list(only)
    cases = selected(s.cases, only)
    if not cases:
        raise ValueError(f"no case name contains any of {only}")
    header = _header(s, only)
    widths = {}
    for case in cases:
        widths[case.kind] = max(widths.get(case.kind, 0), len(case.name))
    rows, kind = [], None
    shown = open_progress(len(cases))
    try:
        for case in cases:
            shown.start(case.name)
            if case.kind != kind:
                kind = case.kind
                s.inputs.clear()  # no kind uses another's inputs
                shown.write(report.section(kind))
            try:
                row = report.row(case, case.measure())
            except Exception as e:  # a refused tile, a missing library: the row says why, the run goes on
                row = report.row(case, None, note=report.reason(e))
            s.lib.free()
            rows.append(row)
            shown.write(report.line(row, widths[kind]))
            shown.finish()
    finally:
        shown.close()
        s.inputs.clear()
    result = {"header": header, "rows": rows}
    if json_path:
        report.write_json(json_path, header, rows)
    return result


def run_as_asked(s: Suite, args, fail: Callable[[str], None]) -> Optional[dict]:
    """What a command line asks of the suite: ``args.only`` selects cases, ``args.list`` only names
    them, ``args.json`` is where the JSON goes; ``fail`` (``parser.error``) reports that no case
    matches. The run's result, or None where the cases were only listed."""
    cases = selected(s.cases, args.only)
    if not cases:
        fail(f"--only {' '.join(map(repr, args.only))}: no case matches (--list names them)")
    if args.list:
        print("\n".join(case.name for case in cases))
        return None
    result = run(s, args.only, args.json)
    if args.json:
        print(f"wrote {args.json}", file=sys.stderr)
    return result
