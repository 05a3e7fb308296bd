"""Tile program errors: each names the user's file:line of the step, and the rule."""
import numpy as np
import pytest
from conftest import cuda_usable

import tileprim as tp

HERE = "test_program_errors.py:"
X = np.linspace(-3, 3, 4 * 64, dtype=np.float32).reshape(4, 64)


def line_of(fn, text):
    """file:line of the first line of fn's source containing text."""
    import inspect
    lines, start = inspect.getsourcelines(fn)
    return f"{HERE}{start + next(i for i, l in enumerate(lines) if text in l)}"


@pytest.mark.parametrize("keyword, value", [("batch_dims", 1), ("backend", "cpu"), ("target", "sm_90a"),
                                            ("out", np.zeros(64, np.float32))])
def test_program_call_options_given_to_a_step(keyword, value):
    def body(x):
        return tp.exp(x, **{keyword: value})

    prog = tp.program(body)
    with pytest.raises(ValueError, match=f"{line_of(body, 'tp.exp')}: exp: {keyword}= belongs to the program call"):
        prog(X, batch_dims=1)


def test_op_on_a_non_tile():
    other = np.ones(64, np.float32)

    def body(x):
        return x + tp.exp(other)

    with pytest.raises(TypeError, match=f"{line_of(body, 'tp.exp')}: exp: an operand is a ndarray, not a tile"):
        tp.program(body)(X, batch_dims=1)


def test_op_on_another_programs_tile():
    kept = []

    @tp.program
    def first(x):
        kept.append(x)
        return x + 1.0

    def second_body(x):
        return tp.add(x, kept[0])

    first(X, batch_dims=1)
    with pytest.raises(ValueError, match=f"{line_of(second_body, 'tp.add')}: add: .* is a tile of another program"):
        tp.program(second_body)(X, batch_dims=1)


def test_a_stale_tile_outside_its_program():
    kept = []

    @tp.program
    def keep(x):
        kept.append(x)
        return x * 2.0

    keep(X, batch_dims=1)
    with pytest.raises(TypeError, match="value of a tile program being traced"):
        tp.exp(kept[0])


@pytest.mark.parametrize("result, what", [(None, "NoneType"), (3.0, "float"), ("x", "str")])
def test_program_returning_no_tile(result, what):
    def body(x):
        tp.exp(x)
        return result

    where = line_of(body, "return result")
    with pytest.raises(ValueError, match=f"{where}: body returns {what}; a program returns a tile"):
        tp.program(body)(X, batch_dims=1)


def test_step_no_variant_accepts_names_the_line_and_has_the_trace():
    def body(x):
        return tp.sum(x, axes=-1, storage="local")  # one thread-private copy per thread: nothing to fold

    with pytest.raises(tp.DispatchError, match=line_of(body, "tp.sum")) as info:
        tp.program(body, scope=tp.cta(96))(X, batch_dims=1)
    message = str(info.value)
    assert "unsupported exec_scope cta for local reduction" in message  # the step's trace
    assert "a butterfly has nothing to fold" in message and "cross_warp" in message
    assert "shared" in message and "sm100_packed" in message


def test_tile_too_large_for_the_scope_says_the_limit_and_the_fix():
    big = np.ones((2, 8192), np.float32)

    def body(x):
        return tp.exp(x)

    with pytest.raises(tp.DispatchError, match=line_of(body, "tp.exp")) as info:
        tp.program(body, scope=tp.thread)(big, batch_dims=1)
    assert "the limit is 1024" in str(info.value) and "Fix: a scope with more threads" in str(info.value)


def test_shared_memory_too_large_for_the_program():
    big = np.ones((2, 40000), np.float32)

    def body(x):
        a = tp.copy(x, storage="shared")
        return tp.sum(a, axes=-1, storage="shared")

    with pytest.raises(ValueError, match="a block has at most 227 KiB"):
        tp.program(body, scope=tp.cta(256))(big, batch_dims=1)


def test_shapes_that_do_not_broadcast():
    def body(x, y):
        return x + y

    with pytest.raises(ValueError, match=f"{line_of(body, 'x + y')}: add: tile shapes"):
        tp.program(body)(X, np.ones(5, np.float32), batch_dims=1)


def test_bad_calls():
    prog = tp.program(lambda x: x + 1.0)
    with pytest.raises(TypeError, match=r"too many positional arguments \(the program's parameters: \(x\)\)"):
        prog(X, X)
    with pytest.raises(ValueError, match="batch_dims: 2 must leave at least one tile dim"):
        prog(X, batch_dims=2)
    with pytest.raises(ValueError, match="all are scalars"):
        prog(1.0)
    if not cuda_usable():
        with pytest.raises(ValueError, match="backend: 'cuda' is not usable here"):
            prog(X, backend="cuda")
    with pytest.raises(TypeError, match="scope"):
        tp.program(scope="cta")
    with pytest.raises(ValueError, match=r"out: shape \(3,\) differs from the result.s \(4, 64\)"):
        prog(X, batch_dims=1, out=np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="scope=tp.warp, but the program runs at tp.cta"):
        tp.program(lambda x: tp.warp.exp(x), scope=tp.cta(32))(X)


def test_failed_call_leaves_out_untouched():
    out = np.full((4, 64), 7.0, np.float32)

    def body(x):
        return tp.exp(x, backend="cpu")

    with pytest.raises(ValueError):
        tp.program(body)(X, batch_dims=1, out=out)
    assert np.all(out == 7.0)


def test_lower_gives_one_kernel_per_program():
    prog = tp.program(lambda x: x * 2.0, scope=tp.cta(64))
    for target in ("sm_90a", "sm_100a"):
        k = tp.lower(prog, X, batch_dims=1, target=target)
        assert k.source.count("__global__") == 1 and k.arch == target
        assert ".entry tp_kernel" in k.ptx


@pytest.mark.parametrize("keyword, value", [("batch_dims", 1), ("scope", tp.warp), ("backend", "cpu"), ("target", "sm_90a"),
                                            ("out", np.zeros(64, np.float32)), ("fastmath", True)])
def test_a_program_called_in_a_programs_body_takes_no_call_options(keyword, value):
    inner = tp.program(lambda x: tp.exp(x))

    def body(x):
        return inner(x, **{keyword: value})

    with pytest.raises(ValueError, match=f"{line_of(body, 'inner(')}: <lambda>: {keyword}= belongs to the outer "
                                         "program's call"):
        tp.program(body)(X, batch_dims=1)
