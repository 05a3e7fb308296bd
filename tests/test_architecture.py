"""One architecture function (csrc/dispatch/architecture): target strings and their numbers."""
import numpy as np
import pytest

import tileprim as tp
from tileprim import _C


@pytest.mark.parametrize("target,number", [("sm_90a", 90), ("sm_100a", 100), ("sm_86", 86), ("sm_120f", 120),
                                           ("compute_90", 90), ("", 0)])
def test_sm_version(target, number):
    assert _C.sm_version(target) == number


@pytest.mark.parametrize("target", ["sm_91", "sm90a", "compute_", "compute_9x", "90"])
def test_an_unknown_target_names_the_rule(target):
    with pytest.raises(ValueError, match=f"target: '{target}' is not a known architecture; the targets are sm_75"):
        _C.sm_version(target)


@pytest.mark.parametrize("cc,target", [(75, "sm_75"), (86, "sm_86"), (90, "sm_90a"), (100, "sm_100a"),
                                       (103, "sm_103a"), (120, "sm_120")])
def test_sm_target_is_the_inverse(cc, target):
    assert _C.sm_target(cc) == target
    assert _C.sm_version(_C.sm_target(cc)) == cc


def test_plans_and_the_table_agree():
    assert tp.plan(tp.sum, [1.0, 2.0], target="sm_100a", backend="cpu").sm_version == 100
    assert all(_C.sm_version(t) == int(t[3:].rstrip("af")) for t in _C.known_targets())


@pytest.mark.skipif(not tp.info()["nvrtc"]["ok"], reason="NVRTC is not available")
def test_compile_arch_falls_back_to_ptx_of_an_older_arch():
    known = _C.cuda.supported_archs()
    assert _C.cuda.compile_arch("sm_90a") == ("sm_90a" if 90 in known else f"compute_{max(a for a in known if a <= 90)}")
    newest = max(known)
    if newest < 121:
        assert _C.cuda.compile_arch("sm_121a") == f"compute_{newest}"


def test_every_planner_reads_the_limits_of_its_target():
    """The limits live in csrc/dispatch/architecture, per target: a plan for no target checks the
    largest any architecture allows, one for sm_86 its 99 KiB of shared memory per block."""
    largest, ampere = _C.target_limits(""), _C.target_limits("sm_86")
    assert largest["shared_per_block"] == 227 * 1024 and ampere["shared_per_block"] == 99 * 1024
    assert largest["registers_per_thread"] == 255 and largest["registers_per_block"] == 65536
    x = np.ones((2, 160 * 256), np.float32)  # a row of 160 KiB in shared memory
    assert tp.plan(tp.cta(256).sum, x, axes=-1, batch_dims=1, target="sm_90a", backend="cpu").variant == "shared"
    with pytest.raises(ValueError, match=r"a shared tile must fit in 99 KiB \(101376 bytes\)"):
        tp.plan(tp.cta(256).sum, x, axes=-1, batch_dims=1, target="sm_86", backend="cpu")

    @tp.program(scope=tp.cta(512))
    def double(t):
        return t + t

    p = tp.plan(double, np.ones((2, 512), np.float32), batch_dims=1, target="sm_90a", backend="cpu")
    assert p.register_budget == min(largest["registers_per_thread"], largest["registers_per_block"] // 512) == 128


def test_a_tile_past_a_limit_is_refused_with_the_fix_by_its_type_not_its_words():
    @tp.program(scope=tp.warp)
    def rows(t):
        return tp.sum(t, axes=-1)

    x = np.ones((2, 32 * 2000), np.float32)  # 2000 a lane: past the 1024 slots a thread holds, and 250 KiB
    with pytest.raises(tp.DispatchError, match="register slots per thread") as refused:
        tp.plan(rows, x, batch_dims=1, backend="cpu")
    assert "Fix: a scope with more threads" in str(refused.value)


def test_python_asks_the_core_for_storages_and_scope_sizes():
    assert tp.STORAGE_SCOPES == tuple(_C.storage_names()) == ("local", "shared", "shared.dyn", "global")
    threads = _C.scope_threads()
    assert threads == {"thread": (1, 1), "warp": (32, 32), "warpgroup": (128, 128), "cta": (1, 1024),
                       "cluster": (64, 16384)}
    assert (tp.warp.threads, tp.warpgroup.threads, tp.cta(threads["cta"][1]).threads) == (32, 128, 1024)
    with pytest.raises(ValueError, match=r"threads: cta\(threads=1025\) needs 1 <= threads <= 1024"):
        tp.cta(threads["cta"][1] + 1)
