"""On a GPU: every elementwise op gives the CPU backend's bits in every dtype (the op table's
same_bits), over at least 10^6 inputs per op and dtype (every input for the 16-bit one-operand
ops): random bit patterns (every exponent, subnormals, NaN, +-inf, +-0) and the overflow and
underflow thresholds of exp and exp2. Tiles of 8 and of 7 elements: 16-bit maps that pair two
registers per instruction must give each lane the bits of the lone last one."""
import numpy as np
import pytest

import tileprim as tp
from tileprim_bench import accuracy
from conftest import DTYPES, NP, bits_equal, cuda_usable

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")]

TABLE = tp.op_table()
ELEMENTWISE = sorted(name for name, spec in TABLE.items() if spec["family"] == "elementwise")
INPUTS = 1 << 20


def random_bits(rng, dtype, n):
    t = NP[dtype]
    width = np.dtype(t).itemsize * 8
    uint = {16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
    return rng.integers(0, np.iinfo(uint).max, n, dtype=uint, endpoint=True).view(t)


def operand(rng, dtype, op):
    """One operand of INPUTS values (all 65,536 16-bit ones, repeated); for the one-operand ops
    in float32/float64 also the sampled inputs of the accuracy measurement (thresholds, specials)."""
    if np.dtype(NP[dtype]).itemsize == 2:
        every = np.arange(1 << 16, dtype=np.uint16).view(NP[dtype])
        return np.tile(every, INPUTS >> 16)
    x = random_bits(rng, dtype, INPUTS)
    if op in accuracy.OPS:
        edges = accuracy.float_inputs(op, dtype, INPUTS >> 4, rng)[:INPUTS]
        x[: edges.size] = edges
    return x


def both(fn, *args, **kwargs):
    cpu = fn(*args, backend="cpu", **kwargs)
    gpu = fn(*args, backend="cuda", **kwargs)
    return np.asarray(cpu), np.asarray(gpu)


@pytest.mark.parametrize("tile", [8, 7])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ELEMENTWISE)
def test_every_elementwise_op_gives_the_cpu_bits_on_the_gpu(op, dtype, tile, rng):
    spec = TABLE[op]
    assert dtype in spec["same_bits"]
    fn = getattr(tp, op)
    rows = INPUTS // tile
    arrays = [operand(rng, dtype, op)[: rows * tile].reshape(rows, tile) for _ in spec["operands"]]
    if op == "zero":
        calls = [((arrays[0],), {})]
    elif op == "fill":
        calls = [((arrays[0], v), {}) for v in (-1.75, 3e38, np.nan)]
    elif op == "cast":
        calls = [((arrays[0], dst), {}) for dst in DTYPES]
    else:
        calls = [(tuple(arrays), {})]
        if "propagate_nan" in spec["options"]:
            calls.append((tuple(arrays), {"propagate_nan": True}))
    for args, kwargs in calls:
        cpu, gpu = both(fn, *args, batch_dims=1, **kwargs)
        differ = np.sum(cpu.view(f"u{cpu.itemsize}") != gpu.view(f"u{gpu.itemsize}"))
        assert bits_equal(cpu, gpu), (op, dtype, kwargs, differ)
