"""Opt-in autotuning of a program's scope (tileprim/_calls/autotune.py): the cost model's best few
candidates timed on the GPU, the fastest kept in memory and on disk per GPU and driver. On the CPU:
the option's checks, the candidates and how their scopes are read, the choice and its memory with a
stand-in clock, and that the CPU backend ignores it. On a GPU: a tuned call computes the CPU
backend's bits at the scope and staging its plan names, and a second call remembers the choice."""
import json

import numpy as np
import pytest

import tileprim as tp
from tileprim._calls.scope import ExecScope
from tileprim._calls import autotune as autotuning
from conftest import bits_equal, cuda_usable, random_tile


def softmax(x):
    e = tp.exp(x - tp.max(x, axes=-1, keepdims=True))
    return e / tp.sum(e, axes=-1, keepdims=True)


def test_autotune_must_be_a_bool():
    with pytest.raises(TypeError, match="autotune"):
        tp.program(softmax, autotune="yes")


@pytest.mark.parametrize("n", [1000, 50257])
def test_candidates_are_the_models_best_accepted_points_and_their_scopes_read_back(n):
    x = np.ones((8, n), np.float32)
    plan = tp.plan(tp.program(softmax), x, batch_dims=1, target="sm_90a")
    chosen = autotuning.candidates(plan.scope_trace)
    ns = {(v["scope"], v["staging"]): v["ns_per_row"] for v in plan.scope_trace if v["accepted"]}
    kernel = {p: autotuning.scope_parts(p[0])[1:] + (p[1],) for p in ns}  # a warpgroup is cta(128)'s kernel
    assert len(chosen) >= 1 and len({kernel[p] for p in chosen}) == len(chosen)
    assert [ns[p] for p in chosen] == sorted(ns[p] for p in chosen)
    best, fourth = ns[chosen[0]], ns[chosen[min(3, len(chosen) - 1)]]
    scopes = {kernel[c][:2] for c in chosen}
    for p in ns:  # left out: spilled, a kept kernel, or past the best four and its scope kept or scored > 2x the best
        assert (p in chosen or p[1] == "spilled" or kernel[p] in {kernel[c] for c in chosen}
                or (ns[p] >= fourth and (kernel[p][:2] in scopes or ns[p] > 2 * best)))
    for p in ns:  # every scope scored within 2x the best is timed at its best-scored staging
        if p[1] != "spilled" and ns[p] <= 2 * best:
            assert kernel[p][:2] in scopes
    for scope, staging in chosen:  # each read back as the scope a call names gives that plan
        named = tp.plan(tp.program(softmax, staging=staging), x, batch_dims=1, target="sm_90a",
                        scope=ExecScope(*autotuning.scope_parts(scope)))
        assert (named.scope, named.staging) == (scope, staging)


def test_an_unknown_scope_name_is_refused():
    with pytest.raises(ValueError, match="cannot read the scope"):
        autotuning.scope_parts("grid(4)")


TRACE = [{"scope": s, "staging": st, "accepted": ok, "ns_per_row": ns}
         for s, st, ok, ns in [("cta(256)", "registers", True, 10.0), ("cta(512)", "streamed", True, 11.0),
                               ("warpgroup", "shared", True, 12.0), ("cluster(2x256)", "shared", True, 13.0),
                               ("cta(1024)", "streamed", True, 25.0), ("cta(64)", "spilled", True, 1.0),
                               ("thread", "registers", False, None)]]
SPEC = ("prog", [], [], [0], "", 0, "", "", "sm_90a", "cuda", [0], False, 1, 0, ())
MEASURED = {("cta", 256): 3.0, ("cta", 512): 1.0, ("warpgroup", 128): 2.0, ("cluster", 512): 4.0}


def _clock(calls):
    def seconds_of(spec):
        calls.append(spec)
        return MEASURED[(spec[4], spec[5])] * 1e-3
    return seconds_of


@pytest.fixture
def table(tmp_path, monkeypatch):
    path = tmp_path / "autotune.json"
    monkeypatch.setattr(autotuning, "_path", lambda: str(path))
    monkeypatch.setattr(autotuning, "_REMEMBERED", {})
    return path


def test_the_fastest_candidate_is_kept_and_remembered_in_memory_and_on_disk(table):
    calls = []
    spec, record = autotuning.tuned_spec(SPEC, TRACE, 4096, "GPU A (driver 1)", _clock(calls))
    assert len(calls) == 4  # the model's best four (the fifth's scope past 2x the best), the spilled one left out
    assert (spec[4], spec[5], spec[12], spec[7]) == ("cta", 512, 1, "streamed")
    assert record["source"] == "measured" and record["scope"] == "cta(512)" and record["staging"] == "streamed"
    assert record["ms"] == {"cta(256) registers": 3.0, "cta(512) streamed": 1.0, "warpgroup shared": 2.0,
                            "cluster(2x256) shared": 4.0}
    assert spec[:4] == SPEC[:4] and spec[8:12] == SPEC[8:12]  # nothing else of the call changed

    again, record = autotuning.tuned_spec(SPEC, TRACE, 4096, "GPU A (driver 1)", _clock(calls))
    assert len(calls) == 4 and record["source"] == "remembered" and again == spec

    autotuning._REMEMBERED.clear()  # a new process: the file
    again, record = autotuning.tuned_spec(SPEC, TRACE, 4096, "GPU A (driver 1)", _clock(calls))
    assert len(calls) == 4 and record["source"] == "remembered on disk" and again == spec

    cluster = autotuning.with_scope(SPEC, "cluster(2x256)", "shared")
    assert (cluster[4], cluster[5], cluster[12]) == ("cluster", 512, 2)


@pytest.mark.parametrize("other", [{"gpu": "GPU B (driver 1)"}, {"gpu": "GPU A (driver 2)"}, {"tiles": 8192}])
def test_another_gpu_driver_or_batch_is_timed_again(table, other):
    calls = []
    autotuning.tuned_spec(SPEC, TRACE, 4096, "GPU A (driver 1)", _clock(calls))
    _, record = autotuning.tuned_spec(SPEC, TRACE, other.get("tiles", 4096), other.get("gpu", "GPU A (driver 1)"),
                                      _clock(calls))
    assert len(calls) == 8 and record["source"] == "measured"
    assert len(json.loads(table.read_text())) == 2


def test_a_damaged_table_is_timed_again_and_written_over(table):
    table.write_text("{not json")
    calls = []
    _, record = autotuning.tuned_spec(SPEC, TRACE, 4096, "GPU A (driver 1)", _clock(calls))
    assert record["source"] == "measured" and len(calls) == 4
    assert list(json.loads(table.read_text()).values())[0]["scope"] == "cta(512)"


@pytest.mark.parametrize("backend", ["cpu", None])  # None: NumPy arrays run where standalone calls run
def test_numpy_arrays_are_never_autotuned(rng, monkeypatch, backend):
    monkeypatch.setattr(autotuning, "tuned_spec", lambda *a: pytest.fail("NumPy arrays timed candidates"))
    x = random_tile(rng, (5, 1000), "float32")
    tuned = tp.program(softmax, autotune=True)
    plan = tp.plan(tuned, x, batch_dims=1, backend=backend)
    assert plan.autotuned is None and "autotuned" not in str(plan)
    assert bits_equal(tuned(x, batch_dims=1, backend=backend), tp.program(softmax)(x, batch_dims=1, backend=backend))


def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if cuda_usable() and torch.cuda.is_available() else None


@pytest.mark.gpu
@pytest.mark.skipif(_torch_cuda() is None, reason="no usable CUDA GPU with PyTorch")
@pytest.mark.parametrize("shape,dtype", [((4096, 1000), "float32"), ((2048, 4097), "bfloat16"),
                                         ((512, 50257), "float32")])
def test_a_tuned_call_gives_the_cpu_bits_at_the_scope_its_plan_names(table, rng, shape, dtype):
    torch = _torch_cuda()
    x = random_tile(rng, shape, dtype)
    xt = torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16) if dtype == "bfloat16" else torch.from_numpy(x)
    xt = xt.cuda()
    tuned = tp.program(softmax, autotune=True)
    got = tuned(xt, batch_dims=1)
    plan = tp.plan(tuned, xt, batch_dims=1)
    a = plan.autotuned
    # measured by the call (tp.plan prepares the call again: it finds the choice in memory)
    assert a is not None and a["source"] in ("measured", "remembered") and len(a["ms"]) >= 1
    assert (plan.scope, plan.staging) == (a["scope"], a["staging"])
    assert a["ms"][f"{a['scope']} {a['staging']}"] == min(a["ms"].values())
    assert "autotuned on" in str(plan)
    cpu = tp.program(softmax, staging=a["staging"])(x[:64], batch_dims=1, backend="cpu",
                                                     scope=ExecScope(*autotuning.scope_parts(a["scope"])))
    mine = got[:64].cpu()
    mine = mine.view(torch.uint16).numpy().view(x.dtype) if dtype == "bfloat16" else mine.numpy()
    assert bits_equal(mine, cpu)
    autotuning._REMEMBERED.clear()
    again = tp.program(softmax, autotune=True)  # another program object: the same trace, from the file
    assert tp.plan(again, xt, batch_dims=1).autotuned["source"] == "remembered on disk"


def test_the_table_names_each_call_and_forget_empties_it(table):
    spec = SPEC[:1] + ([("x", "bfloat16", [4096], False)],) + SPEC[2:]
    autotuning.tuned_spec(spec, TRACE, 4096, "GPU A (driver 1)", _clock([]))
    (entry,) = json.loads(table.read_text()).values()
    assert entry["call"] == "prog: 4096 x x bfloat16(4096,)" and entry["gpu"] == "GPU A (driver 1)"
    autotuning.forget(disk=False)  # memory only: the file still answers
    assert autotuning.tuned_spec(spec, TRACE, 4096, "GPU A (driver 1)", _clock([]))[1]["source"] == "remembered on disk"
    autotuning.forget()
    assert not table.exists()
    calls = []
    assert autotuning.tuned_spec(spec, TRACE, 4096, "GPU A (driver 1)", _clock(calls))[1]["source"] == "measured"
    assert len(calls) == 4


@pytest.mark.parametrize("kind", ["link", "fifo", "directory", "list"])
def test_a_table_that_is_no_regular_json_object_is_timed_again_without_blocking(table, tmp_path, kind):
    import os
    other = tmp_path / "elsewhere.json"
    other.write_text(json.dumps({"k": {"scope": "cta(64)"}}))
    if kind == "link":
        table.symlink_to(other)
    elif kind == "fifo":
        os.mkfifo(table)
    elif kind == "directory":
        table.mkdir()
    else:
        table.write_text("[1, 2]")
    calls = []
    if kind == "directory":  # nothing can be renamed over it: kept in memory, with a warning
        with pytest.warns(RuntimeWarning, match="kept in memory only"):
            _, record = autotuning.tuned_spec(SPEC, TRACE, 4096, "GPU A (driver 1)", _clock(calls))
    else:
        _, record = autotuning.tuned_spec(SPEC, TRACE, 4096, "GPU A (driver 1)", _clock(calls))
        assert json.loads(table.read_text()).popitem()[1]["scope"] == "cta(512)"
    assert record["source"] == "measured" and len(calls) == 4
    assert json.loads(other.read_text()) == {"k": {"scope": "cta(64)"}}  # a link's target is never written
    assert not list(tmp_path.glob(".autotune.*"))  # no temp file left


def test_a_tuned_programs_derived_backward_is_tuned_too():
    torch = pytest.importorskip("torch")
    from tileprim._torch import program_op

    def scaled(x, w):
        return x * w

    tuned = tp.program(scaled, autotune=True)
    x = torch.randn(6, 40, dtype=torch.float64, requires_grad=True)
    w = torch.randn(40, dtype=torch.float64, requires_grad=True)
    tuned(x, w, batch_dims=1).sum().backward()
    ops = [op for op in program_op._NAMED.values() if op.program is tuned]
    derived = [d[0] for op in ops for d in op.backwards.values() if d is not None and d[0] is not None]
    assert derived and all(p._autotune is True for p in derived)


def test_a_candidate_that_fails_is_left_out_and_all_failing_raises(table):
    def failing_at(*which):
        def seconds_of(spec):
            if (spec[4], spec[5]) in which:
                raise RuntimeError(f"CUDA_ERROR_INVALID_VALUE launching {spec[4]}({spec[5]})\nmore")
            return MEASURED[(spec[4], spec[5])] * 1e-3
        return seconds_of

    spec, record = autotuning.tuned_spec(SPEC, TRACE, 4096, "GPU A (driver 1)", failing_at(("cta", 512)))
    assert record["scope"] == "warpgroup" and "cta(512) streamed" not in record["ms"]
    assert record["failed"] == {"cta(512) streamed": "CUDA_ERROR_INVALID_VALUE launching cta(512)"}
    autotuning.forget()
    with pytest.raises(RuntimeError, match="launching cta\\(256\\)"):
        autotuning.tuned_spec(SPEC, TRACE, 4096, "GPU A (driver 1)", failing_at(*[k for k in MEASURED]))
    assert not table.exists()  # nothing remembered


# ---- batched standalone calls (tileprim/_calls/call.py): tuned under TILEPRIM_AUTOTUNE=1 ----------

def _sum_call(n: int, dtype: str):
    """tp.sum(x, axes=-1) of rows of n as call.py hands it to the planner (no scope, default storage)."""
    import tileprim._C as _C
    return _C.OpCall("sum", [_C.TileRef("src", dtype, [n], "local", None)], _C.TileRef("out", dtype, [], "local", None),
                     "thread", 1, [-1], False, {}, "", 1)


def _cpu_sum_at(x, scope: str, staging: str):
    """The CPU backend's row sums of x at one point (scope, staging) of the planner's candidates."""
    import tileprim._C as _C
    core = _C.prepare_call(_sum_call(x.shape[-1], str(x.dtype)), "sm_90a", "cpu", [], True, False, scope, staging)
    out = np.empty(x.shape[:-1], x.dtype)
    core.run_host_one(np.ascontiguousarray(x), out, x.shape[0])
    return core.plan, out


@pytest.mark.parametrize("n,dtype", [(50257, "float32"), (4097, "float32"), (1000, "float64")])
def test_each_candidate_point_of_a_batched_call_plans_again_as_it_was_scored(rng, n, dtype):
    x = random_tile(rng, (6, n), dtype, special=False)
    plan = tp.plan(tp.sum, x, axes=-1, batch_dims=1)
    points = autotuning.candidates(plan.scope_trace)
    assert points
    for scope, staging in points:
        at, _ = _cpu_sum_at(x, scope, staging)
        assert (at.scope, at.staging) == (scope, staging)
    chosen = next(v for v in plan.scope_trace if v.get("chosen"))
    _, sums = _cpu_sum_at(x, chosen["scope"], chosen["staging"])  # the model's own point: the call's bits
    assert bits_equal(sums, tp.sum(x, axes=-1, batch_dims=1))


def test_batched_calls_on_numpy_arrays_are_never_autotuned(rng, monkeypatch):
    monkeypatch.setenv("TILEPRIM_AUTOTUNE", "1")
    monkeypatch.setattr(autotuning, "tuned", lambda *a: pytest.fail("NumPy arrays timed candidates"))
    x = random_tile(rng, (5, 4097), "float32")
    plan = tp.plan(tp.max, x, axes=-1, batch_dims=1)
    assert plan.autotuned is None and "autotuned" not in str(plan)


def test_a_point_named_without_a_staging_is_shown_by_its_scope(table):
    record = autotuning.tuned(("call",), "sum: 8 x src float32(100,)", [("cta(256)", ""), ("warp", "")], 8,
                              "GPU A (driver 1)", lambda scope, staging: {"cta(256)": 2e-3, "warp": 1e-3}[scope])
    assert (record["scope"], record["staging"]) == ("warp", "")
    assert "warp kept" in autotuning.described(record) and "cta(256) 2.000 ms" in autotuning.described(record)


@pytest.mark.gpu
@pytest.mark.skipif(_torch_cuda() is None, reason="no usable CUDA GPU with PyTorch")
@pytest.mark.parametrize("shape,dtype", [((512, 50257), "float32"), ((2048, 4097), "float32")])
def test_a_tuned_batched_call_gives_the_cpu_bits_at_the_point_its_plan_names(table, rng, monkeypatch, shape, dtype):
    from tileprim._calls.prepared import forget
    torch = _torch_cuda()
    monkeypatch.setenv("TILEPRIM_AUTOTUNE", "1")
    forget()  # an untuned call of this signature made earlier in the process is not reused
    x = random_tile(rng, shape, dtype, special=False)
    xt = torch.from_numpy(x).cuda()
    got = tp.sum(xt, axes=-1, batch_dims=1)
    plan = tp.plan(tp.sum, xt, axes=-1, batch_dims=1)
    a = plan.autotuned
    assert a is not None and a["source"] in ("measured", "remembered") and len(a["ms"]) >= 1
    assert (plan.scope, plan._bound.plan.staging) == (a["scope"], a["staging"])
    assert a["ms"][f"{a['scope']} {a['staging']}"] == min(a["ms"].values()) and "autotuned on" in str(plan)
    _, cpu = _cpu_sum_at(x[:64], a["scope"], a["staging"])
    assert bits_equal(got[:64].cpu().numpy(), cpu)
    want = x.astype(np.float64).sum(axis=-1)
    assert np.allclose(got.cpu().numpy(), want, rtol=1e-4, atol=1e-3 * np.abs(x).sum(axis=-1).max())
    autotuning._REMEMBERED.clear()
    forget()
    assert tp.plan(tp.sum, xt, axes=-1, batch_dims=1).autotuned["source"] == "remembered on disk"


def test_the_variable_is_on_at_1_off_at_0_or_unset_and_refused_otherwise(monkeypatch):
    """TILEPRIM_AUTOTUNE=yes was read as off, silently; autotune='yes' is a TypeError."""
    for value, on in (("1", True), ("0", False), ("", False)):
        monkeypatch.setenv("TILEPRIM_AUTOTUNE", value)
        assert autotuning.requested(None) is on and autotuning.requested(False) is False
    monkeypatch.delenv("TILEPRIM_AUTOTUNE")
    assert autotuning.requested(None) is False and autotuning.requested(True) is True
    monkeypatch.setenv("TILEPRIM_AUTOTUNE", "yes")
    with pytest.raises(ValueError, match=r"^TILEPRIM_AUTOTUNE: 'yes' is not '1' \(on\) or '0' \(off\)"):
        autotuning.requested(None)
