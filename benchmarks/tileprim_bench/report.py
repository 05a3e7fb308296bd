"""A measured case as a JSON row and as a line of the printed table."""
from __future__ import annotations

import json
from typing import List, Optional

from .cases import Case, Measured

RATIO = "tileprim_ms / baseline_ms: below 1, tileprim is faster"
SECTIONS = {
    "throughput": "throughput: ms per call, GB/s = bytes read + written / time; (r) = " + RATIO,
    "latency": "small calls: µs, the median time of one call; (r) = " + RATIO,
    "kernel": "getting a kernel (a warp sum for sm_90a): ms, the build or load alone; "
              "lower_ms: the whole tp.lower",
    "program": "tile programs: TB/s = (bytes read + written) / time (140x4096: µs of host wall time per "
               "call); Nx best peer = tileprim's TB/s / the fastest peer's (above 1: tileprim is faster); "
               "oracle: worst |got - want| / |want| against float64; bits: tileprim's result against the CPU "
               "backend's (on the CPU: against the first rows run alone)",
}
# One unit per section, so a column reads down without converting: small calls in µs.
UNIT_SCALE = {"throughput": ("ms", 1.0), "latency": ("µs", 1e3), "kernel": ("ms", 1.0)}


def row(case: Case, measured: Optional[Measured], note: Optional[str] = None) -> dict:
    """The JSON row of ``case``: what it is, tileprim's and each baseline's ms (and GB/s where the
    case moves a known number of bytes), tileprim's ratio to each baseline and to the fastest
    one. ``measured`` is None, with the reason in ``note``, where the case could not run.

    Parameters
    ----------
    case : Case
    measured : Measured or None
    note : str, optional

    Returns
    -------
    dict
    """
    def gbps(ms):
        return case.bytes / ms / 1e6 if case.bytes and ms else None
    ours = measured.tileprim_ms if measured else None
    baselines = measured.baselines if measured else {}
    note = note or (measured.note if measured else None)
    ratios = {name: ours / ms for name, ms in baselines.items() if ours and ms}
    best = min(ratios, key=baselines.get) if ratios else None
    return {"case": case.name, "kind": case.kind, "op": case.op, "dtype": case.dtype, "scope": case.scope,
            "K": case.K, "shape": list(case.shape) if case.shape else None, "bytes": case.bytes,
            "tileprim_ms": ours, "baselines": dict(baselines), "tileprim_GBps": gbps(ours),
            "baselines_GBps": {name: gbps(ms) for name, ms in baselines.items()} if case.bytes else {},
            "ratios": ratios, "best_baseline": best, "ratio": ratios[best] if best else None,
            "detail": measured.detail if measured else {}, "note": note}


def _time(ms: float, kind: str) -> str:
    unit, scale = UNIT_SCALE.get(kind, ("ms", 1.0))
    return f"{ms * scale:8.3f} {unit}"


def _cell(ms: Optional[float], gbps: Optional[float], kind: str) -> str:
    return _time(ms, kind) + (f" {gbps:7.1f} GB/s" if gbps is not None else "")


def reason(error: Exception) -> str:
    """The error's type and the first line of its message (a DispatchError's is its whole trace)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def line(r: dict, width: int = 0) -> str:
    """One printed line: the case (padded to ``width``), tileprim's time (and GB/s), each
    baseline's with tileprim's ratio to it in parentheses, then the case's own figures, or n/a
    with the reason. A tile program's row has its own line (``program_line``)."""
    if r["kind"] == "program":
        return program_line(r, width)
    text = f"{r['case']:<{width}}  tileprim "
    if r["tileprim_ms"] is None:
        return text + f"n/a: {r['note']}"
    text += _cell(r["tileprim_ms"], r["tileprim_GBps"], r["kind"])
    for name, ms in r["baselines"].items():
        ratio = r["ratios"].get(name)
        text += f"   {name} {_cell(ms, r['baselines_GBps'].get(name), r['kind'])}" + (f" ({ratio:.2f})" if ratio else "")
    for key, value in r["detail"].items():
        text += f"   {key} {value:.3f}" if isinstance(value, float) else f"   {key} {value}"
    return text


def _figure(ms: Optional[float], gbps: Optional[float], per_call: bool) -> str:
    if ms is None:
        return "n/a"
    return f"{ms * 1e3:.1f}" if per_call or gbps is None else f"{gbps / 1e3:.3g}"


def _error(value: Optional[float]) -> str:
    return "nan" if value is None else f"{value:.1e}"


def program_line(r: dict, width: int = 0) -> str:
    """A tile program's line: each library's TB/s (or µs per call), those that could not run,
    tileprim's throughput over the fastest peer's, the oracle's verdict and the bits check, and
    why tileprim could not run where it could not."""
    d = r["detail"]
    per_call = d.get("unit") == "µs"
    text = f"{r['case']:<{width}}  {'µs/call' if per_call else 'TB/s'}: "
    text += f"tileprim {_figure(r['tileprim_ms'], r['tileprim_GBps'], per_call)}"
    for name, ms in r["baselines"].items():
        text += f"  {name} {_figure(ms, r['baselines_GBps'].get(name), per_call)}"
    text += "".join(f"  {name} n/a ({why[:60]})" for name, why in d.get("n/a", {}).items())
    if d.get("vs_best_peer") is not None:
        text += f"  | {d['vs_best_peer']:.2f}x best peer ({r['best_baseline']})"
    if "oracle_ok" in d:
        text += (f"  | oracle {'ok' if d['oracle_ok'] else 'FAIL'} {_error(d['oracle'])} "
                 f"(tol {d['tolerance']:.1e}), bits {d['bits']}")
    off = [name for name, ok in d.get("peers_ok", {}).items() if not ok]
    if off:
        text += f"  | off the oracle: {', '.join(off)}"
    if r["note"]:
        text += f"  | tileprim n/a: {r['note']}"
    return text


def section(kind: str) -> str:
    """The heading printed before the first case of each kind."""
    return f"\n== {SECTIONS[kind]}"


def write_json(path: str, header: dict, rows: List[dict]) -> None:
    """``{"header": header, "rows": rows}``; strict JSON (a figure that does not apply is null)."""
    with open(path, "w") as f:
        json.dump({"header": header, "rows": rows}, f, indent=2, allow_nan=False)
        f.write("\n")
