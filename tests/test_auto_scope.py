"""The planner's choice of scope (csrc/program/auto_scope.cc, scope_cost.cc): a program whose scope
is named nowhere, and a batched standalone call with no scope, is planned at every candidate scope
and staging and runs at the one the cost model scores fastest; the plan says why. Checked here: the
done-when rows run on the CPU backend and match float64, tp.plan(..., target="sm_90a") plans each
and names its scope, the CPU plan equals the sm_90a plan, a named scope is obeyed, scope=None on one
tile is tp.thread, and, on every shape with two or more measured H200 points, the model's first
choice among them is within 5 % of the fastest.

Rows the scope's threads do not divide (2047, 4097, 50257) plan once ragged tiles are padded
(issue 49 item 2, the `ragged` branch); until then every candidate refuses them and those cases
fail here."""
import json
import pathlib
import re
import sys

import numpy as np
import pytest

import tileprim as tp
from conftest import NP, bits_equal, cuda_usable, random_tile

import programs as P

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from tileprim_bench.program_workloads import WORKLOADS  # noqa: E402

ROWS = (1, 7, 100, 1000, 1024, 2047, 4096, 4097, 8192, 50257, 262144)
DTYPES = ("float32", "bfloat16")
# every H200 point measured for these programs (the scope sweep, the benchmark runs with the old
# hand table and with the planner's choice), one per (case, scope, staging)
POINTS = ROOT / "benchmarks" / "results" / "h200-auto-scope-points.json"
# cross-entropy's forward (for the backward) and backward over 8192 rows of bfloat16 logits, each
# scope named, the planner's staging (and one run with no scope named); session 18 measured the
# forward at 128256 again, with stagings named too (a point's fastest run counts)
CROSS_ENTROPY_POINTS = [ROOT / "benchmarks" / "results" / name for name in
                        ("h200-2026-11-29-s7-cross-entropy-scopes.jsonl", "h200-2026-11-30-s18-cross-entropy-scopes.jsonl")]


def layernorm(x, w, b, eps):
    xf = tp.cast(x, "float32") if x.dtype == "bfloat16" else x
    mean = tp.sum(xf, axes=-1, keepdims=True) / x.shape[-1]
    d = xf - mean
    var = tp.sum(d * d, axes=-1, keepdims=True) / x.shape[-1]
    y = d * tp.rsqrt(var + eps) * w + b
    return tp.cast(y, x.dtype) if x.dtype == "bfloat16" else y


def layernorm64(x, w, b, eps):
    x = np.asarray(x, np.float64)
    d = x - x.mean(axis=-1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + eps) * np.asarray(w, np.float64) + np.asarray(b, np.float64)


EPS = 1e-5
PROGRAMS = {"softmax": tp.program(P.softmax), "rmsnorm": tp.program(P.rmsnorm), "layernorm": tp.program(layernorm),
            "logsumexp": tp.program(P.logsumexp)}


def _arguments(name, rng, n, dtype):
    rows = 1 if n > 100_000 else 2  # a row of 262144 takes seconds on the CPU backend
    x = random_tile(rng, (rows, n), dtype, special=False)
    if name == "rmsnorm":
        return x, random_tile(rng, (n,), "float32", special=False).astype(NP[dtype]), EPS
    if name == "layernorm":
        w = random_tile(rng, (n,), "float32", special=False)
        b = random_tile(rng, (n,), "float32", special=False)
        return x, w, b, EPS
    return (x,)


def _oracle(name, args):
    if name == "softmax":
        return P.softmax64(args[0])
    if name == "rmsnorm":
        return P.rmsnorm64(*args)
    if name == "layernorm":
        return layernorm64(*args)
    return P.logsumexp64(args[0])


@pytest.mark.parametrize("n", ROWS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_no_scope_runs_and_matches_float64(name, dtype, n, rng):
    args = _arguments(name, rng, n, dtype)
    program = PROGRAMS[name]
    plan = tp.plan(program, *args, batch_dims=1, target="sm_90a")
    assert plan.scope_trace and plan.scope in [v["scope"] for v in plan.scope_trace if v["chosen"]]
    assert f"at scope {plan.scope} (the planner's choice" in str(plan)
    out = program(*args, batch_dims=1, backend="cpu")
    cpu_plan = tp.plan(program, *args, batch_dims=1, backend="cpu")  # the call's, remembered
    assert (cpu_plan.scope, cpu_plan.staging) == (plan.scope, plan.staging)  # the CPU models sm_90a
    want = _oracle(name, args)
    got = np.asarray(out, np.float64)
    assert got.shape == want.shape and np.isfinite(got).all()
    # float32: a few roundings per element; bfloat16: the output's rounding (2^-8 relative)
    rtol = 2.0 ** -7 if dtype == "bfloat16" else 1e-5
    scale = np.abs(want).max(axis=-1, keepdims=True)
    assert np.all(np.abs(got - want) <= rtol * np.abs(want) + rtol * 1e-2 * scale), name


@pytest.mark.parametrize("n", ROWS)
@pytest.mark.parametrize("op", ["sum", "max"])
def test_batched_standalone_call_with_no_scope(op, n, rng):
    x = random_tile(rng, (3, n), "float32", special=False)
    fn = getattr(tp, op)
    plan = tp.plan(fn, x, axes=-1, batch_dims=1)
    assert plan.scope_trace and plan.scope == next(v["scope"] for v in plan.scope_trace if v["chosen"])
    assert "(the planner's choice: no scope is named)" in str(plan)
    out = np.full(3, np.nan, np.float32)
    fn(x, axes=-1, batch_dims=1, out=out, backend="cpu")
    want = getattr(np.asarray(x, np.float64), op)(axis=-1)
    np.testing.assert_allclose(out, want, rtol=1e-5 * max(1.0, np.log2(n)), atol=1e-5 * np.abs(x).sum(-1).max())


def test_one_tile_with_no_scope_is_thread(rng):
    x = random_tile(rng, (100,), "float32", special=False)
    plan = tp.plan(tp.sum, x)
    assert plan.scope == "thread" and plan.scope_trace == []
    assert tp.sum(x) == tp.sum(x, scope=tp.thread)


def test_a_named_scope_is_obeyed(rng):
    x = random_tile(rng, (2, 4096), "float32", special=False)
    program = PROGRAMS["softmax"]
    for scope in (tp.cta(1024), tp.warp):
        plan = tp.plan(program, x, batch_dims=1, scope=scope)
        assert plan.scope == str(scope).removeprefix("tp.").replace("threads=", "") and plan.scope_trace == []
    named = tp.program(P.softmax, scope=tp.cta(512))
    assert tp.plan(named, x, batch_dims=1).scope == "cta(512)"
    assert tp.plan(tp.sum, x, axes=-1, batch_dims=1, scope=tp.cta(64)).scope == "cta(64)"


def test_a_step_naming_the_scope_names_the_programs(rng):
    def f(x):
        return x / tp.sum(x, axes=-1, keepdims=True, scope=tp.cta(256))

    x = random_tile(rng, (2, 4096), "float32", special=False)
    plan = tp.plan(tp.program(f), x, batch_dims=1)
    assert plan.scope == "cta(256)" and plan.scope_trace == []


def test_scope_trace_records_refusals_and_scores(rng):
    x = random_tile(rng, (2, 8192), "float32", special=False)
    plan = tp.plan(PROGRAMS["softmax"], x, batch_dims=1, target="sm_90a")
    trace = plan.scope_trace
    refused = [v for v in trace if not v["accepted"]]
    assert refused and all(v["reasons"] and v["ns_per_row"] is None for v in refused)  # thread: 8192 per thread
    scored = [v for v in trace if v["accepted"]]
    chosen = [v for v in scored if v["chosen"]]
    assert len(chosen) == 1 and chosen[0]["staging"] == plan.staging
    assert all(chosen[0]["ns_per_row"] <= v["ns_per_row"] * 1.02 for v in scored)
    assert any(r.startswith("memory ") for r in chosen[0]["reasons"])
    assert "scope_trace" not in plan._repr_html_() and "the planner's choice" in plan._repr_html_()


def _verdict(plan, scope, staging):
    return next(v for v in plan.scope_trace if v["accepted"] and v["scope"] == scope and v["staging"] == staging)


def _term(verdict, name):
    """A cost term's figures: its ns and the byte counts its text names."""
    text = next(r for r in verdict["reasons"] if r.startswith(name + " "))
    numbers = [float(w) for w in re.findall(r"(\d+) (?:ns|bytes|re-read)", text)]
    return numbers[0], numbers[1:]


def _plan(name, n, dtype="float32"):
    workload = next(w for w in WORKLOADS if w.name == name)
    x = np.ones((2, n), NP[dtype])
    return tp.plan(workload.program, *workload.arguments(x, x, np.ones(n, NP[dtype])), batch_dims=1, target="sm_90a")


def _overlap(verdict):
    """A verdict's memory and cores terms, and what their overlap came to (the score less barriers and drains)."""
    memory, _ = _term(verdict, "memory")
    cores, _ = _term(verdict, "cores")
    barriers, _ = _term(verdict, "barriers")
    drains = _term(verdict, "drains")[0] if any(r.startswith("drains ") for r in verdict["reasons"]) else 0
    return memory, cores, verdict["ns_per_row"] - barriers - drains


@pytest.mark.parametrize("name, reads", [("logsumexp", 2), ("softmax", 3), ("rmsnorm", 2)])
def test_streamed_passes_read_the_row_once_per_pass(name, reads):
    """A streamed staging reads its rows once per reduction and once for the rows it returns
    (logsumexp returns none), the re-reads from L2 or DRAM."""
    n = 65536
    _, (dram, *l2) = _term(_verdict(_plan(name, n), "cta(1024)", "streamed"), "memory")
    written = 4 if name == "logsumexp" else 4 * n
    assert dram + sum(l2) == pytest.approx(reads * 4 * n + written, abs=8)


def test_a_clusters_lone_cta_does_not_overlap():
    """On a cluster whose CTAs are alone on their SMs (a share of 32768 float32 in shared memory),
    the loads, maps and stores add up and each reduction drains; at three CTAs per SM they overlap."""
    plan = _plan("rmsnorm", 65536)
    lone, shared = _verdict(plan, "cluster(2x256)", "shared"), _verdict(plan, "cluster(4x256)", "shared")
    assert any(r.startswith("one CTA per SM") for r in lone["reasons"]) and _term(lone, "drains")[0] > 0
    memory, cores, overlapped = _overlap(lone)
    assert overlapped == pytest.approx(memory + cores, abs=4)
    assert not any(r.startswith(("one CTA per SM", "drains")) for r in shared["reasons"])
    memory, cores, overlapped = _overlap(shared)
    assert overlapped == pytest.approx(max(memory, cores), abs=2)


def test_a_lone_ctas_row_filled_element_by_element_does_not_overlap():
    """cta(1024) staging a row of 50257 float32 in shared memory (one CTA per SM): the row is not a
    multiple of 16 bytes, so its fill moves element by element before the passes, which add up; a
    row of 50256 fills 16 bytes at a time and overlaps."""
    odd = _verdict(_plan("softmax", 50257), "cta(1024)", "shared")
    assert any(r.startswith("alone on its SM, its row filled element by element") for r in odd["reasons"])
    memory, cores, overlapped = _overlap(odd)
    assert overlapped == pytest.approx(memory + cores, abs=4)
    even = _verdict(_plan("softmax", 50256), "cta(1024)", "shared")
    assert not any("element by element" in r for r in even["reasons"])
    memory, cores, overlapped = _overlap(even)
    assert overlapped < 0.9 * (memory + cores)


def test_a_share_through_registers_does_not_overlap():
    """A cluster's bfloat16 share at runs of one element (2 bytes, no cp.async) moves through
    registers a chunk at a time: its loads, maps and stores add up even at several CTAs per SM;
    float32 runs of one copy whole (4-byte cp.async) and overlap."""
    through = _verdict(_plan("logsumexp", 50257, "bfloat16"), "cluster(4x256)", "shared")
    assert any(r.startswith("its share moves through registers") for r in through["reasons"])
    memory, cores, overlapped = _overlap(through)
    assert overlapped == pytest.approx(memory + cores, abs=4)
    whole = _verdict(_plan("logsumexp", 50257), "cluster(4x256)", "shared")
    memory, cores, overlapped = _overlap(whole)
    assert not any("do not overlap" in r for r in whole["reasons"])
    assert overlapped == pytest.approx(max(memory, cores), abs=2)
    assert not any(r.startswith("partial stores") for v in _plan("rmsnorm", 50257).scope_trace for r in v["reasons"])


def test_a_clusters_16_bit_runs_of_one_holding_a_weight_take_a_register_per_slot_more():
    """RMSNorm bfloat16 in registers at cluster(4x256): rows of 50257 (runs of one, 2-byte loads)
    hold x and w with a register per slot more than rows of 50258 (runs of two) or float32 rows:
    one CTA per SM, not two (ptxas: 174 registers against 127)."""
    def registers(n, dtype):
        text = next(r for r in _verdict(_plan("rmsnorm", n, dtype), "cluster(4x256)", "registers")["reasons"]
                    if r.startswith("memory "))
        return [int(k) for k in re.search(r"(\d+) CTAs per SM .*?\((\d+) registers per thread", text).groups()]
    assert registers(50258, "bfloat16") == registers(50257, "float32") == [2, 128]
    ctas, regs = registers(50257, "bfloat16")
    assert ctas == 1 and regs >= 128 + 48


def test_a_streamed_pass_that_stores_from_dram_slows_with_the_rows_in_flight():
    """cross-entropy's backward (one streamed pass reading each row from DRAM and storing it): at
    cta(256), 6 rows per SM, the memory term says so and its rate falls by sqrt(6); at cta(1024), one
    row per SM, it does not. A storing pass whose re-reads hit L2 (RMSNorm bfloat16 at 16384) and a
    program that stores no row (logsumexp) do not slow down."""
    x = np.ones((2, 32000), NP["bfloat16"])
    per_row = np.ones((2, 1), np.float32)
    plan = tp.plan(tp.layers.cross_entropy_backward, x, np.zeros((2, 1), np.int64), -100, per_row, per_row, per_row,
                   batch_dims=1, target="sm_90a")
    many = next(r for r in _verdict(plan, "cta(256)", "streamed")["reasons"] if r.startswith("memory "))
    assert "6 instances per SM" in many and "792 rows in flight on the chip" in many and "at 41 %" in many
    assert not any("rows in flight" in r for r in _verdict(plan, "cta(1024)", "streamed")["reasons"])
    for name, n, dtype in (("rmsnorm", 16384, "bfloat16"), ("logsumexp", 50257, "float32")):
        streamed = _verdict(_plan(name, n, dtype), "cta(256)", "streamed")
        assert not any("rows in flight" in r for r in streamed["reasons"]), name


@pytest.mark.parametrize("name, n, dtype", [("softmax", 32000, "float32"), ("rmsnorm", 4097, "bfloat16"),
                                            ("logsumexp", 50257, "float32"), ("softmax", 262144, "bfloat16")])
def test_a_staging_scores_as_if_named(name, n, dtype, rng):
    """The planner stages each candidate scope once and scores its other accepted stagings by
    switching that plan to them (row_staging.h, switch_staging); a program that names the staging
    plans it from the start: the same verdict at every scope both traces hold. (spilled aside: a
    scope whose first staging is chunked scores spilled with that staging's rows left in the plan,
    as it did before switch_staging.)"""
    functions = {"softmax": P.softmax, "rmsnorm": P.rmsnorm, "logsumexp": P.logsumexp}
    args = _arguments(name, rng, n, dtype)
    auto = tp.plan(PROGRAMS[name], *args, batch_dims=1, target="sm_90a").scope_trace
    first = {}  # each scope's first accepted staging: the one its plan was staged with
    for v in auto:
        if v["accepted"]:
            first.setdefault(v["scope"], v["staging"])

    def unchosen(v):
        return v["ns_per_row"], [r for r in v["reasons"] if not r.startswith("chosen:")]

    switched = 0
    for staging in ("shared", "streamed"):
        named = tp.plan(tp.program(functions[name], staging=staging), *args, batch_dims=1, target="sm_90a")
        named_verdicts = {v["scope"]: v for v in named.scope_trace if v["accepted"]}
        for v in auto:
            if v["accepted"] and v["staging"] == staging and v["scope"] in named_verdicts:
                assert unchosen(v) == unchosen(named_verdicts[v["scope"]]), (v["scope"], staging)
                switched += first[v["scope"]] != staging
    assert switched > 0


def _points():
    cases = {}
    for run in json.loads(POINTS.read_text())["runs"]:
        cases.setdefault(run["case"], []).append(run)
    return {case: runs for case, runs in cases.items() if len(runs) >= 2}


# Shapes the model is known to rank more than 5 % off, measured, with why; strict, so that a fix shows.
KNOWN_MISSES: dict[str, str] = {
    # Rows of 50257 since the spread layout's runs divide the row (runs of one element), swept on the
    # H200 with clusters of 2 and 4 (h200-2026-11-29-s7-scopes-50257-*.jsonl); the model, refit there
    # for the rest (scope_cost.cc), still ranks these more than 5 % behind the fastest measured point
    "add_rmsnorm 50257 bfloat16": "cluster(2x512) streamed (2.13 TB/s) ranked over cta(1024) streamed (2.44): "
                                  "0.87x; the model counts one row input in flight per chunk, add+RMSNorm "
                                  "streams two (counting both ranks cta(1024) streamed first here but moves "
                                  "add+RMSNorm bfloat16 at 32000-65536 off their fastest)",
    "add_rmsnorm 50257 float32": "cta(1024) streamed (2.06 TB/s) ranked over cluster(4x256) shared (2.95): 0.70x; "
                                 "cta(1024) streamed falls from 3.58 TB/s at 32000 to 2.06 here (RMSNorm's 2.89), "
                                 "and ptxas gives cluster(4x256) streamed 112 registers a thread (the model 48): "
                                 "no term for either fits the other shapes",
    "rmsnorm 50257 bfloat16": "cta(512) streamed (2.00 TB/s) ranked over cta(1024) shared (2.39): 0.83x; ptxas "
                              "gives cta(1024) shared 32 registers a thread, two CTAs per SM, where the model's "
                              "chunk estimate (40) leaves one (its fill then serial); at 32000 the same kernel "
                              "takes 60",
    # softmax at rows of 32000, swept on the H200 (h200-2026-11-29-s8/s9-scopes-32000-softmax-*.jsonl):
    # the model ranks cluster(2x256) registers first, measured 8 % behind the fastest
    "softmax 32000 bfloat16": "cluster(2x256) registers (1.95 TB/s) ranked over cluster(4x256) registers (2.13): "
                              "0.92x; the model scores clusters of two 1.18-1.21x their measured time, of four "
                              "1.08x (exact exp: the bfloat16 rows are bound by instruction issue, issue 45)",
    # logsumexp float32 at 32000, swept again on the H200 (h200-2026-11-29-s13-scopes-32000-float32.jsonl)
    "logsumexp 32000 float32": "cluster(2x256) shared (2.80 TB/s) ranked over cluster(2x256) streamed (3.16) and "
                               "cta(512) streamed (2.78-3.23): 0.89x; the model scores both streamed points "
                               "1.15x cluster(2x256) shared (one value stored per row: no storing pass), not "
                               "explained yet",
    # rows of 4097 bfloat16 (runs of one element: every element a 2-byte load of its own)
    "rmsnorm 4097 bfloat16": "cta(64) registers (3.00 TB/s, three runs 2.99-3.19) ranked over warpgroup registers "
                             "(3.34): 0.90x; since the planner counts a row-shaped copy of one value as no "
                             "registers (the maps read the value), cta(64) takes the rows in registers; the "
                             "model scores it 0.85x warpgroup's time, measured 1.11x",
    "add_rmsnorm 4097 bfloat16": "cta(256) shared (1.78 TB/s) ranked over cta(256) registers (3.36, "
                                 "h200-2026-11-29-s8-scopes-4097-add_rmsnorm-bfloat16.jsonl): 0.53x; the rows "
                                 "start off a 16-byte boundary 7 times in 8 and fill shared memory element by "
                                 "element; counting both row inputs in flight in registers ranks cta(256) "
                                 "registers first but moves add+RMSNorm bfloat16 at 1000-8192 to slower "
                                 "registers points (0.86-0.92x, h200-2026-11-29-s8-programs-choices.json); "
                                 "scoring the element-by-element fill at 0.6 of DRAM's rate (session 13) moves it "
                                 "to cta(256) streamed, 2.0 TB/s: cta(256)'s passes are slow at 4097 either way",
    # cross-entropy's forward: two reductions, one value stored per row (the backward's rows in
    # flight do not apply); the model's error on the points below, unexplained
    "cross_entropy_for_backward 8192x128256 bfloat16": "cluster(4x256) shared (1.56 TB/s) ranked over cta(512) "
                                                       "streamed (1.91, session 18) and cta(256) streamed (1.80): "
                                                       "0.82x; the model scores cluster(4x256) shared 0.74x its "
                                                       "measured time and cta(512) streamed 1.30x (half its re-reads "
                                                       "from DRAM by the L2 share, 64 % busy); not the instruction "
                                                       "count: the exact path's SASS is 19.4 an element past a row's "
                                                       "fixed cost (cta(256) registers, rows of 4096 and 8192; the "
                                                       "27-30 were per element with it), the model's 20",
}


def _known(cases):
    return [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[c])) if c in KNOWN_MISSES else c
            for c in sorted(cases)]


def _assert_first_choice_within_5_percent(case, plan, runs):
    """Among the (scope, staging) points measured for this shape, the one the model ranks first is
    within 5 % of the fastest. Where the model's overall choice is a candidate no run measured, the
    assertion message says so (the check is then on its ranking of the measured ones)."""
    # a warpgroup is the 128 threads of cta(128), whichever name a run gave it
    def named(scope):
        return "cta(128)" if scope == "warpgroup" else scope
    scored = {(named(v["scope"]), v["staging"]): v["ns_per_row"] for v in plan.scope_trace if v["accepted"]}
    chosen = (named(plan.scope), plan.staging)
    measured = {}
    for r in runs:
        point = (named(r["scope"]), r["staging"])
        measured[point] = max(measured.get(point, 0.0), r["tbps"])
    # a measured point the planner does not score (a cluster, where a CTA holds the rows in
    # registers) still counts as the best to come within 5 % of
    ranked = sorted((k for k in measured if k in scored), key=lambda k: scored[k])
    assert ranked, (case, "the planner scores none of the measured points", set(measured))
    first = chosen if chosen in measured else ranked[0]
    best = max(measured.values())
    note = "" if chosen in measured else f" (the model's choice {chosen} was not measured)"
    assert measured[first] >= 0.95 * best, (case + note, first, measured[first], best, ranked)


@pytest.mark.parametrize("case", _known(_points()))
def test_model_within_5_percent_of_the_best_measured(case):
    """The four workloads of program_workloads.py, on every shape with two or more H200 points."""
    name, n, dtype = case.split()
    n = int(n)
    workload = next(w for w in WORKLOADS if w.name == name)
    x = np.ones((2, n), NP[dtype])
    plan = tp.plan(workload.program, *workload.arguments(x, x, np.ones(n, NP[dtype])), batch_dims=1, target="sm_90a")
    _assert_first_choice_within_5_percent(case, plan, _points()[case])


def _cross_entropy_points():
    cases = {}
    for path in CROSS_ENTROPY_POINTS:
        for line in path.read_text().splitlines():
            run = json.loads(line)
            cases.setdefault(run["case"], []).append(run)
    return cases


@pytest.mark.parametrize("case", _known(_cross_entropy_points()))
def test_model_within_5_percent_of_the_best_measured_cross_entropy(case):
    """tileprim.layers' cross-entropy forward (for the backward) and backward, as the H200 runs
    called them: logits (rows, vocab) bfloat16, int64 labels, ignore_index -100, and for the
    backward each row's max, sum of exponentials and loss gradient (float32)."""
    name, shape, dtype = case.split()
    n = int(shape.split("x")[1])
    x = np.ones((2, n), NP[dtype])
    label, per_row = np.zeros((2, 1), np.int64), np.ones((2, 1), np.float32)
    args = (x, label, -100) + ((per_row, per_row, per_row) if name == "cross_entropy_backward" else ())
    plan = tp.plan(getattr(tp.layers, name), *args, batch_dims=1, target="sm_90a")
    _assert_first_choice_within_5_percent(case, plan, _cross_entropy_points()[case])


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")
@pytest.mark.parametrize("n", ROWS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_no_scope_gives_the_cpus_bits_on_the_gpu(name, dtype, n, rng):
    """The GPU plans what the CPU plans for sm_90a (on an H100/H200) and computes the same bits."""
    args = _arguments(name, rng, n, dtype)
    program = PROGRAMS[name]
    gpu_plan = tp.plan(program, *args, batch_dims=1, backend="cuda")
    if gpu_plan._core.target == "sm_90a":
        cpu_plan = tp.plan(program, *args, batch_dims=1, backend="cpu")
        assert (gpu_plan.scope, gpu_plan.staging) == (cpu_plan.scope, cpu_plan.staging)
    gpu = program(*args, batch_dims=1, backend="cuda")
    cpu = program(*args, batch_dims=1, backend="cpu")
    assert bits_equal(np.asarray(gpu), np.asarray(cpu))
