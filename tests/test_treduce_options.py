"""TreduceOptions: a treduce call's options as one value, checked and normalised once where the
call enters, hashable (every memo keys by it), and read by field in the C++ core."""
import dataclasses

import numpy as np
import pytest

import tileprim as tp
from tileprim.comm._options import treduce_options


def made(op="sum", root=0, tile=(64, 256), pingpong=False, valid="dynamic", accumulate=None, backend=None,
         dispatch=None, transport=""):
    return treduce_options(op, root, tile, pingpong, valid, accumulate, backend, dispatch, transport)


def test_equal_calls_give_one_value_whatever_spelling():
    first = made(tile=(8, 32), pingpong=True)
    for spelled in (made(tile=[8, 32], pingpong=True), made(tile=(np.int64(8), 32), pingpong=np.bool_(True)),
                    made(op=np.str_("sum"), tile=(8, 32), pingpong=True)):
        assert spelled == first and hash(spelled) == hash(first)
        assert type(spelled.tile) is tuple and type(spelled.tile[0]) is int and type(spelled.pingpong) is bool
        assert type(spelled.op) is str


def test_it_is_immutable_and_a_memo_key():
    options = made()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.op = "max"
    assert {options: 1}[made()] == 1
    assert made(root=1) != options and made(transport="shm") != options and made(backend="cpu") != options


@pytest.mark.parametrize("tile", [(True, 4), (1.0, 4)])
def test_a_tile_equal_to_a_valid_one_is_still_refused(tile):
    """1 == True == 1.0, yet only 1 is a tile size: a made value is never returned for the others."""
    made(tile=(1, 4))
    with pytest.raises(TypeError, match="tile: expected two ints"):
        made(tile=tile)


def test_an_unhashable_option_gets_the_check_s_error():
    with pytest.raises(TypeError, match="op: expected 'sum', 'max' or 'min', not"):
        made(op=["sum"])


def test_the_core_reads_it_by_field():
    core = made(op="max", root=2, tile=(3, 5), pingpong=True, valid="static", accumulate="float32",
                transport="nccl").core()
    assert (core.op, core.root, core.tile_rows, core.tile_cols, core.pingpong, core.valid, core.accumulate,
            core.transport) == ("max", 2, 3, 5, True, "static", "float32", "nccl")
    assert str(core) == ("accumulate='float32', op='max', pingpong=True, root=2, tile_cols=5, tile_rows=3, "
                         "transport='nccl', valid='static'")


def test_the_plan_prints_the_options_the_call_gave(rng):
    xs = [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(3)]
    plan = tp.plan(tp.comm.treduce, tp.comm.ParallelGroup(xs, root=2), op="min", tile=(2, 4), pingpong=True)
    assert "op='min', pingpong=True, root=2, tile_cols=4, tile_rows=2, valid='dynamic') -> dst=" in str(plan)


def test_the_signature_is_designs():
    import inspect
    params = inspect.signature(tp.comm.treduce).parameters
    assert list(params)[:6] == ["group", "dst", "op", "tile", "pingpong", "valid"]
    assert (params["op"].default, params["tile"].default, params["pingpong"].default, params["valid"].default) == \
        ("sum", (64, 256), True, "dynamic")
    g = tp.comm.ParallelGroup([np.full((4, 4), r, np.float32) for r in range(2)], root=0)
    assert tp.plan(tp.comm.treduce, g).params["buffers"] == "acc/ping/pong"
    np.testing.assert_array_equal(tp.comm.treduce(g, None, "sum", (2, 2), False, "static"), np.ones((4, 4)))
