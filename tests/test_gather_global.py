"""A pick of one element per row read where it lies (gather_global), and plans the kernel builder
builds: cross-entropy over vocabularies of 50257-262144 with no scope named plans its rows in
passes (never `spilled`), its logit at the label read from global memory, and every scope and
staging the auto scope accepts lays out within the target's shared memory; on the CPU backend it
matches float64, forward and backward, with int32 and int64 labels, ignored rows and labels outside
the row (NaN)."""
import numpy as np
import pytest

import tileprim as tp
from tileprim import S, TileLayout, tx
from conftest import NP
from tileprim import _C

torch = pytest.importorskip("torch")
tpnn = pytest.importorskip("tileprim.nn")
F = torch.nn.functional

ARCH = "sm_90a"
SHARED_LIMIT = 232448  # bytes a block of sm_90a may take
ce = tp.layers.cross_entropy


def labels(rng, vocab, rows, index):
    label = rng.integers(-vocab, vocab, rows).astype(index)  # negative labels count from the end
    label[0] = -100  # ignored (a valid NumPy index: never read past the row)
    label[1] = vocab  # outside the row: NaN
    label[2] = -vocab - 1
    label[3] = vocab - 1
    return label


def cross_entropy64(x, label):
    x64 = x.astype(np.float64)
    m = x64.max(-1, keepdims=True)
    with np.errstate(invalid="ignore"):  # inf - inf in a row holding inf: NaN, as ours
        lse = np.log(np.exp(x64 - m).sum(-1)) + m[:, 0]
    at = np.where(label < 0, label + x.shape[1], label).clip(0, x.shape[1] - 1).astype(np.int64)
    return lse - np.take_along_axis(x64, at[:, None], 1)[:, 0]


@pytest.mark.parametrize("index", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_cross_entropy_at_128256_matches_float64_with_no_scope(dtype, index, rng):
    rows, vocab = 6, 128256
    x = (rng.standard_normal((rows, vocab)) * 4).astype(NP[dtype])
    x[5, 17] = np.inf if dtype == "float32" else x[5, 17]  # a row whose loss is NaN (inf - inf)
    label = labels(rng, vocab, rows, index)
    got = ce(x, label[:, None], -100, batch_dims=1, backend="cpu")
    assert got.shape == (rows, 1) and got.dtype == np.float32
    got = got[:, 0]
    assert got[0] == 0 and np.isnan(got[[1, 2]]).all()
    want = cross_entropy64(x, label)
    for r in (3, 4) + ((5,) if dtype == "bfloat16" else ()):
        assert abs(got[r] - want[r]) <= 2e-6 * abs(want[r]) + 1e-6, r
    if dtype == "float32":
        assert np.isnan(got[5])


def test_cross_entropy_at_128256_backward_is_torchs(rng):
    rows, vocab = 4, 128256
    logits = torch.from_numpy((rng.standard_normal((rows, vocab)) * 3).astype(np.float32)).requires_grad_()
    target = torch.tensor([5, -100, vocab - 1, 77], dtype=torch.int64)
    loss = tpnn.CrossEntropyLoss()(logits, target)
    want = F.cross_entropy(logits, target)
    torch.testing.assert_close(loss, want, rtol=1e-5, atol=1e-6)
    got, = torch.autograd.grad(loss, logits)
    wide = logits.detach().double().requires_grad_()
    ref, = torch.autograd.grad(F.cross_entropy(wide, target), wide)  # the float64 oracle
    torch.testing.assert_close(got.double(), ref, rtol=3e-5, atol=1e-11)
    assert torch.equal(got[1], torch.zeros(vocab))  # the ignored row: no gradient


def test_a_pick_through_a_cast_gives_the_bits_of_the_cast_of_the_pick(rng):
    """take_along_axis(cast(x), i) is planned as cast(take_along_axis(x, i)): the same bits, NaN for
    a label outside the row, and the row itself read where it lies."""
    @tp.program(scope=tp.cta(64))
    def pick(x, label):
        return tp.take_along_axis(tp.cast(x, "float32"), label)

    x = rng.standard_normal((5, 333)).astype(NP["bfloat16"])
    x[2, 7] = np.nan
    label = np.array([[0], [332], [7], [-1], [333]], np.int64)
    got = pick(x, label, batch_dims=1, backend="cpu")
    want = np.take_along_axis(x, label.clip(-333, 332), 1).astype(np.float32)
    assert np.array_equal(got[:4], want[:4], equal_nan=True) and np.isnan(got[[2, 4]]).all()
    plan = tp.plan(pick, x, label, batch_dims=1)
    assert [s.variant for s in plan.steps] == ["gather_global", "reg"]  # the pick, then its cast


@pytest.mark.parametrize("vocab", [50257, 128256, 151936, 262144])
def test_cross_entropy_plans_in_passes_and_reads_the_logit_where_it_lies(vocab):
    """A vocabulary no CTA holds in registers: rows in passes at a CTA, or spread over a cluster
    (whose pick reads the input where it lies too)."""
    x = np.zeros((4, vocab), NP["bfloat16"])
    plan = tp.plan(ce, x, np.zeros((4, 1), np.int64), -100, batch_dims=1, target=ARCH)
    assert plan.staging in ("streamed", "shared") or plan.scope.startswith("cluster("), str(plan)
    take = [s for s in plan.steps if s.op == "take_along_axis"]
    assert [s.variant for s in take] == ["gather_global"], str(plan)
    assert "global memory" in str(take[0])
    launch = _C.cuda.launch(plan._core, ARCH)
    # in passes the body reads the row itself; rows a cluster holds in registers the frame places first
    assert launch["paths"]["in0"] == ("placed" if plan.staging == "registers" else "body_moved")
    assert launch["shared_bytes"] <= SHARED_LIMIT


def scope_of(name):
    """The scope a trace names: thread, warp, warpgroup, cta(n) or cluster(CxT)."""
    named = {"thread": tp.thread, "warp": tp.warp, "warpgroup": tp.warpgroup}
    if name.startswith("cluster("):
        ctas, threads = name[8:-1].split("x")
        return tp.cluster(int(ctas), threads=int(threads))
    return named.get(name) or tp.cta(int(name[4:-1]))


def kernel_bytes(verdict):
    said = [r for r in verdict["reasons"] if r.startswith("the kernel takes ")]
    return int(said[0].split()[3]) if said else None


@pytest.mark.parametrize("vocab", [1000, 32000, 128256])
def test_every_candidate_the_auto_scope_accepts_is_one_the_kernel_builder_lays_out(vocab):
    """The planner asks the kernel frame: a staging it accepts fits the target's shared memory, and
    the bytes its trace states are those of the kernel's launch shape."""
    x = np.zeros((4, vocab), NP["bfloat16"])
    label = np.zeros((4, 1), np.int64)
    auto = tp.plan(ce, x, label, -100, batch_dims=1, target=ARCH)
    accepted = [v for v in auto.scope_trace if v["accepted"]]
    assert accepted
    for v in accepted:
        prog = tp.program(ce._fn, scope=scope_of(v["scope"]), staging=v["staging"])
        plan = tp.plan(prog, x, label, -100, batch_dims=1, target=ARCH)
        launch = _C.cuda.launch(plan._core, ARCH)
        assert launch["shared_bytes"] <= SHARED_LIMIT
        chosen = [s for s in plan.staging_trace if s["name"] == plan.staging][0]
        assert kernel_bytes(chosen) == launch["shared_bytes"], (v, chosen)


def test_a_staging_whose_kernel_needs_more_shared_memory_than_the_target_declines_with_the_limit(rng):
    """A row of 120064 bfloat16 in registers at cta(256), one run of 469 per thread, is staged by the
    kernel frame through shared memory: more than sm_90a's 227 KiB, so `spilled` declines at planning
    (the kernel builder refused it before: the planner counted only the tiles between steps)."""
    runs = TileLayout(S[(256, 469) : (1 @ tx, 1)])  # thread t holds elements 469 t ... 469 t + 468

    @tp.program(scope=tp.cta(256), staging="spilled")
    def twice(x):
        return tp.cast(tp.cast(x, "float32", layout=runs) * 2.0, x.dtype)

    x = np.zeros((2, 256 * 469), NP["bfloat16"])
    with pytest.raises(tp.DispatchError, match="sm_90a allows 232448"):
        tp.plan(twice, x, batch_dims=1, target=ARCH)
    x = x[:, :256 * 200]  # 200 a thread: x and the result staged, 204800 bytes and the skew, within it
    runs = TileLayout(S[(256, 200) : (1 @ tx, 1)])
    plan = tp.plan(twice, x, batch_dims=1, target=ARCH)
    launch = _C.cuda.launch(plan._core, ARCH)
    assert launch["paths"]["in0"] == "skewed" and launch["shared_bytes"] > 204800
    spilled = [v for v in plan.staging_trace if v["name"] == "spilled"][0]
    assert kernel_bytes(spilled) == launch["shared_bytes"] <= SHARED_LIMIT


@pytest.mark.skipif(not tp.info()["nvrtc"]["ok"], reason="NVRTC is not available")
@pytest.mark.parametrize("vocab", [1000, 128256])
def test_the_kernel_loads_the_pick_by_index_and_compiles_in_seconds(vocab):
    """NVRTC here, no GPU: the pick is one call of take_along_axis_global on the tile's pointer, and
    no register spills to local memory (the spilled plan took NVRTC 166 s at 128256)."""
    x = np.zeros((4, vocab), NP["bfloat16"])
    k = tp.lower(ce, x, np.zeros((4, 1), np.int32), -100, batch_dims=1, target=ARCH)
    assert "tp::take_along_axis_global<" in k.source and "g_in0 + tile * " + str(vocab) in k.source
    assert k.local_bytes == 0, k.source
