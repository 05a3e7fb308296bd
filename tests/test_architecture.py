"""One architecture function (csrc/dispatch/architecture): target strings and their numbers."""
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
