"""Accuracy of tileprim's one-operand maps: the largest error in ulps against the correctly
rounded result, per op and dtype. float16 and bfloat16 take every one of their 65,536 inputs and
must round correctly; float32 and float64 take samples: special values, the overflow and
underflow thresholds and their neighbours, random bit patterns (every exponent, subnormals
included) and random values where the op is neither 0 nor infinite. The oracle is float64 NumPy
for the 16- and 32-bit types (a float64 result within 2^-20 of a 16-bit rounding boundary is
settled by mpmath) and mpmath for float64; ``exhaustive_float32`` adds every float32 input of
the binades where the errors are largest.
``benchmarks/accuracy.py`` prints the table the op table's ``max_ulp`` comes from; the tests run
the same measurement on fewer samples. ``fastmath_table`` measures the GPU's approximations that
``fastmath=True`` runs (``benchmarks/accuracy.py --fastmath``, on a GPU): every 16-bit input, 2^24
float32 samples, a division by one value too, against float64; the package's
fastmath_errors.json holds what it printed."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, Optional

import numpy as np

import tileprim as tp
from tileprim._arrays.dtypes import numpy_dtype

OPS = ("exp", "exp2", "log", "log2", "rsqrt", "silu", "tanh", "erf", "sigmoid", "sqrt", "reciprocal")
SIXTEEN_BIT = ("float16", "bfloat16")

# where each op's results are neither 0 nor infinite nor exact, per wide dtype
_RANGES = {
    "float32": {"exp": (-104.0, 89.0), "exp2": (-150.0, 128.0), "silu": (-110.0, 40.0), "sigmoid": (-110.0, 20.0),
                "tanh": (-10.0, 10.0), "erf": (-4.0, 4.0)},
    "float64": {"exp": (-746.0, 710.0), "exp2": (-1075.0, 1024.0), "silu": (-760.0, 40.0),
                "sigmoid": (-760.0, 40.0), "tanh": (-20.0, 20.0), "erf": (-6.0, 6.0)},
}


def _float64_oracle(op: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        x = x.astype(np.float64)
        if op in ("silu", "sigmoid"):  # x e / (1 + e), e = e^-|x|: finite wherever the result is
            e = np.exp(-np.abs(x))
            s = np.where(x >= 0, 1 / (1 + e), e / (1 + e))
            return s if op == "sigmoid" else np.where(x == -np.inf, -0.0, x * s)
        if op == "erf":  # the C library's, within an ulp of float64
            return np.vectorize(math.erf, otypes=[np.float64])(x)
        return {"exp": np.exp, "exp2": np.exp2, "log": np.log, "tanh": np.tanh, "log2": np.log2, "sqrt": np.sqrt,
                "rsqrt": lambda v: 1 / np.sqrt(v), "reciprocal": lambda v: 1 / v}[op](x)


def _mpmath_oracle(op: str) -> Callable:
    import mpmath as mp
    return {"exp": mp.exp, "exp2": lambda v: mp.power(2, v), "log": mp.log, "log2": lambda v: mp.log(v, 2),
            "sqrt": mp.sqrt, "rsqrt": lambda v: 1 / mp.sqrt(v), "reciprocal": lambda v: 1 / v,
            "silu": lambda v: v / (1 + mp.exp(-v)), "sigmoid": lambda v: 1 / (1 + mp.exp(-v)), "tanh": mp.tanh,
            "erf": mp.erf}[op]


def _finfo(dtype: str):
    import ml_dtypes
    return ml_dtypes.finfo(numpy_dtype(dtype))


def ulps(got: np.ndarray, exact, dtype: str) -> np.ndarray:
    """|got - exact| in ulps of the dtype at exact (exact: float64 values or mpmath numbers).
    Where exact rounds to an infinity or is NaN, got must be that infinity / a NaN (error 0,
    else inf); a got of the wrong class (inf, NaN, zero sign) is an error of inf."""
    fi = _finfo(dtype)
    g = got.astype(np.float64)
    if isinstance(exact, np.ndarray):
        with np.errstate(all="ignore"):
            rounded = exact.astype(numpy_dtype(dtype)).astype(np.float64)
            ex = np.floor(np.log2(np.maximum(np.abs(exact), float(fi.smallest_normal))))
            err = np.abs(g - exact) / np.exp2(ex - fi.nmant)
    else:  # mpmath values, for float64
        import mpmath as mp
        rounded = np.array([float(v) for v in exact])
        min_exponent = int(np.log2(float(fi.smallest_normal)))

        def ulp_error(gi, v):
            if not mp.isfinite(v) or v == 0:
                return 0.0
            binade = max(int(mp.floor(mp.log(abs(v), 2))), min_exponent)
            return float(abs(mp.mpf(float(gi)) - v) / mp.mpf(2) ** (binade - fi.nmant))
        err = np.array([ulp_error(gi, v) for gi, v in zip(g, exact)])
        err[rounded == 0] = np.abs(g[rounded == 0]) / float(fi.smallest_subnormal)
    special = ~np.isfinite(rounded) | (rounded == 0)
    same_class = (np.isnan(g) & np.isnan(rounded)) | (g == rounded) & (np.signbit(g) == np.signbit(rounded))
    err = np.where(special, np.where(same_class, 0.0, np.where(rounded == 0, err, np.inf)), err)
    return np.where(np.isnan(g) != np.isnan(rounded), np.inf, err)


def float_inputs(op: str, dtype: str, samples: int, rng: np.random.Generator) -> np.ndarray:
    """Specials, the neighbours of the op's thresholds, random bit patterns and random values
    in the op's finite range, as dtype (float32 or float64)."""
    t = numpy_dtype(dtype)
    fi = np.finfo(t)
    uint = np.uint32 if t == np.float32 else np.uint64
    sub, big = float(fi.smallest_subnormal), float(fi.max)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, 0.5, float(fi.tiny), sub, -sub,
                        big, -big], t)
    lo, hi = _RANGES[dtype].get(op, (0.0, 4.0))
    # the thresholds: where the result crosses the dtype's max, its smallest normal and half its
    # smallest subnormal (below which results round to 0)
    edges = []
    if op in ("exp", "exp2", "silu", "sigmoid"):
        base = {"exp": np.log, "exp2": np.log2, "silu": np.log, "sigmoid": np.log}[op]
        edges = [base(float(fi.max)), base(float(fi.tiny)), base(float(fi.smallest_subnormal)) - base(2.0)]
    near = np.concatenate([np.array([e], t).view(uint) + np.arange(-200, 201, dtype=np.int64).astype(uint)
                           for e in edges]).view(t) if edges else np.zeros(0, t)
    bits = rng.integers(0, np.iinfo(uint).max, samples, dtype=uint, endpoint=True).view(t)
    spread = rng.uniform(lo, hi, samples).astype(t)
    return np.concatenate([special, near, np.abs(near) if op in ("silu", "sigmoid") else near, bits, spread])


@dataclass
class Accuracy:
    op: str
    dtype: str
    inputs: int
    max_ulp: float
    not_correctly_rounded: Optional[int] = None  # 16-bit types: inputs not rounded correctly
    worst_input: Optional[float] = None


def _correct_16_bit(op: str, dtype: str, x: np.ndarray) -> np.ndarray:
    """The correctly rounded result for every x: float64's rounding, mpmath where float64 is
    within 2^-20 (relative; 2^-145 absolute) of a boundary between two 16-bit results. Not closer:
    ml_dtypes rounds a float64 to bfloat16 through float32, twice, which is the one rounding only
    further than float32's half ulp from a boundary (2^-24 relative, 2^-150 among subnormals)."""
    t = numpy_dtype(dtype)
    exact = _float64_oracle(op, x)
    with np.errstate(all="ignore"):
        probe = np.maximum(np.abs(exact) * 2.0 ** -20, 2.0 ** -145)
        down = (exact - probe).astype(t)
        up = (exact + probe).astype(t)
        rounded = exact.astype(t)
    unsure = np.nonzero(np.isfinite(exact) & (exact != 0) & (down.view(np.uint16) != up.view(np.uint16)))[0]
    if unsure.size:
        import mpmath as mp
        mp.mp.prec = 200
        fn = _mpmath_oracle(op)
        for i in unsure:
            v = fn(mp.mpf(float(x[i])))
            if not (np.isfinite(down[i]) and np.isfinite(up[i])):
                continue  # the boundary to infinity: float64's rounding is far from it here
            below, above = down[i], up[i]
            mid = (mp.mpf(float(below)) + mp.mpf(float(above))) / 2
            even = below if (below.view(np.uint16) & 1) == 0 else above
            rounded[i] = below if v < mid else above if v > mid else even
    return rounded


def apply(op: str, x: np.ndarray, backend: str = "cpu", fastmath: bool = False, *operands) -> np.ndarray:
    """tp.<op> over a flat array, as tiles of 8 elements (the last one padded), then ``operands``
    (scalars)."""
    padded = np.concatenate([x, np.ones((-x.size) % 8, x.dtype)])
    got = getattr(tp, op)(padded.reshape(-1, 8), *operands, batch_dims=1, backend=backend, fastmath=fastmath)
    return np.asarray(got).reshape(-1)[:x.size]


def measure(op: str, dtype: str, samples: int = 1 << 20, seed: int = 0, backend: str = "cpu") -> Accuracy:
    """The max error of ``tp.<op>`` on ``backend`` (see the module's docstring for the inputs;
    ``samples`` sets the float32 / float64 counts, float64 checked with mpmath on a tenth)."""
    rng = np.random.default_rng(seed)
    if dtype in SIXTEEN_BIT:
        x = np.arange(1 << 16, dtype=np.uint16).view(numpy_dtype(dtype))
        got = apply(op, x, backend)
        correct = _correct_16_bit(op, dtype, x)
        nans = np.isnan(got.astype(np.float64)) & np.isnan(correct.astype(np.float64))
        same = (got.view(np.uint16) == correct.view(np.uint16)) | nans
        err = ulps(got, _float64_oracle(op, x), dtype)
        return Accuracy(op, dtype, x.size, float(np.max(err)), int(np.sum(~same)),
                        float(x[np.argmax(err)]))
    if dtype == "float64":
        samples = max(samples // 10, 100)
    x = float_inputs(op, dtype, samples, rng)
    got = apply(op, x, backend)
    if dtype == "float64":
        import mpmath as mp
        mp.mp.prec = 160
        oracle = _mpmath_oracle(op)
        nan = mp.mpf("nan")

        def exact_of(v):
            if np.isnan(v) or (op in ("log", "log2", "rsqrt", "sqrt") and v < 0):
                return nan
            if op in ("silu", "sigmoid") and v == -np.inf:
                return mp.mpf(0)
            if v == 0 and op in ("log", "log2"):
                return mp.mpf("-inf")
            if v == 0 and op in ("rsqrt", "reciprocal"):
                return mp.mpf("-inf") if np.signbit(v) else mp.mpf("inf")
            return oracle(mp.mpf(float(v)))
        err = ulps(got, [exact_of(v) for v in x], dtype)
    else:
        err = ulps(got, _float64_oracle(op, x), dtype)
    worst = int(np.argmax(err))
    return Accuracy(op, dtype, x.size, float(err[worst]), worst_input=float(x[worst]))


# float32 magnitudes [2^lo, 2^hi) per sign where each op's error is largest and its results
# neither 0, infinite nor 1 (exp of |x| < 2^-26 is 1 or its neighbour below); log's outside this
# range add k ln2 to the same log(1 + f); rsqrt(4x) = rsqrt(x) / 2 exactly, the scaling included
_EXHAUSTIVE = {"exp": {"+": (-26, 7), "-": (-26, 7)}, "exp2": {"+": (-26, 8), "-": (-26, 8)},
               "silu": {"+": (-26, 5), "-": (-26, 7)}, "log": {"+": (-4, 4)}, "log2": {"+": (-4, 4)},
               "rsqrt": {"+": (-2, 2)}, "sqrt": {"+": (-2, 2)}, "reciprocal": {"+": (0, 1)},
               "tanh": {"+": (-13, 4)}, "erf": {"+": (-14, 2)}, "sigmoid": {"+": (-26, 5), "-": (-26, 7)}}


def exhaustive_float32(op: str, backend: str = "cpu") -> Accuracy:
    """The max error of ``tp.<op>`` over every float32 input in the op's ``_EXHAUSTIVE`` binades
    (2^23 inputs per binade; minutes per op), together with ``measure``'s samples elsewhere."""
    worst = measure(op, "float32", backend=backend)
    inputs = worst.inputs
    for sign, (lo, hi) in _EXHAUSTIVE[op].items():
        for e in range(lo, hi):
            first = np.array([2.0 ** e], np.float32).view(np.uint32)[0] | (0x80000000 if sign == "-" else 0)
            x = (np.arange(1 << 23, dtype=np.uint64) + int(first)).astype(np.uint32).view(np.float32)
            err = ulps(apply(op, x, backend), _float64_oracle(op, x), "float32")
            inputs += x.size
            i = int(np.argmax(err))
            if err[i] > worst.max_ulp:
                worst = Accuracy(op, "float32", 0, float(err[i]), worst_input=float(x[i]))
    worst.inputs = inputs
    return worst


def table(samples: int = 1 << 20, seed: int = 0, ops=OPS, dtypes=("float32", "float64") + SIXTEEN_BIT,
          backend: str = "cpu") -> Dict[str, Dict[str, Accuracy]]:
    """``measure`` for every op and dtype: {op: {dtype: Accuracy}}."""
    return {op: {d: measure(op, d, samples, seed, backend) for d in dtypes} for op in ops}


# ---- fastmath=True: the GPU's approximations -----------------------------------------------------
# the ops of OPS with an approximation (tp.op_table()[op]["fastmath"]), and "fdiv": a division by one value
FASTMATH_OPS = tuple(op for op in OPS if tp.op_table()[op]["fastmath"] is not None)
DIVISORS = 16  # scalars each division by one value is measured with
# where an approximation's intermediate flushes before its result would: silu's sigmoid(x) is below
# 2^-126 (flushed to 0) for x below -87.34, where x sigmoid(x) is still normal down to -92.2 (and
# below 2^-119.5): a 0 there is flushed, as its op table form says, not an error in ulps
FLUSHED_BELOW = {"silu": 2.0 ** -119}


@dataclass
class FastAccuracy:
    """The errors of one approximation on one dtype: ``max_ulp`` in the dtype's ulps where the
    float64 result is a normal number of the dtype (below it ex2.approx.ftz flushes results to 0:
    ``flushed`` counts the inputs whose subnormal result came out 0, or, for the ops of
    ``FLUSHED_BELOW``, whose result below that came out 0), ``max_abs`` the absolute
    error where |result| <= 1 (what bounds lg2.approx's error near 1, where ulps grow without
    bound), ``wrong_specials`` the inputs whose result or exact result is NaN or infinite and the
    other is not that, but for ``overflow_edge``: an infinity where the exact result is finite
    beyond half the dtype's max, or the other way round."""

    op: str
    dtype: str
    inputs: int
    max_ulp: float
    max_abs: float
    worst_input: float
    flushed: int
    wrong_specials: int
    overflow_edge: int = 0

    def row(self) -> dict:
        return {"max_ulp": self.max_ulp, "max_abs": self.max_abs, "inputs": self.inputs,
                "worst_input": self.worst_input, "flushed": self.flushed, "wrong_specials": self.wrong_specials,
                "overflow_edge": self.overflow_edge}


def _fast_errors(op: str, dtype: str, x: np.ndarray, got: np.ndarray, exact: np.ndarray) -> FastAccuracy:
    fi = _finfo(dtype)
    g = got.astype(np.float64)
    with np.errstate(all="ignore"):
        rounded = exact.astype(numpy_dtype(dtype)).astype(np.float64)
        special = ~np.isfinite(rounded) | ~np.isfinite(g)  # either side NaN or infinite
        below = max(FLUSHED_BELOW.get(op, 0.0), float(fi.smallest_normal))
        flushed = (rounded != 0) & (np.abs(rounded) < below) & (g == 0)
        normal = ~special & ~flushed & (np.abs(exact) >= float(fi.smallest_normal))
        err = np.where(normal, ulps(got, exact, dtype), 0.0)
        small = np.isfinite(g) & (np.abs(exact) <= 1)
        absolute = np.where(small, np.abs(g - exact), 0.0)
        # an infinity one ulp early or late beside the largest finite results (x log2(e) rounds before
        # ex2.approx): counted apart, not as a wrong special
        edge = special & ~np.isnan(g) & ~np.isnan(rounded) & (np.abs(exact) >= float(fi.max) / 2)
    wrong = special & ~edge & ~((np.isnan(g) & np.isnan(rounded)) | (g == rounded))
    worst = int(np.argmax(err))
    return FastAccuracy(op, dtype, int(x.size), float(err[worst]), float(np.max(absolute)), float(x[worst]),
                        int(np.sum(flushed)), int(np.sum(wrong)), int(np.sum(edge & (g != rounded))))


def fastmath_accuracy(op: str, dtype: str, samples: int = 1 << 24, seed: int = 0,
                      backend: str = "cuda") -> FastAccuracy:
    """``tp.<op>(x, fastmath=True)`` on ``backend`` against float64: every 16-bit input, or float32
    samples (``float_inputs``: specials, thresholds, random bit patterns, random values in range)."""
    rng = np.random.default_rng(seed)
    if dtype in SIXTEEN_BIT:
        x = np.arange(1 << 16, dtype=np.uint16).view(numpy_dtype(dtype))
    else:
        x = float_inputs(op, dtype, samples // 2, rng)
    return _fast_errors(op, dtype, x, apply(op, x, backend, True), _float64_oracle(op, x))


def fastmath_division(dtype: str, samples: int = 1 << 24, seed: int = 0, backend: str = "cuda") -> FastAccuracy:
    """``tp.fdiv(a, b, fastmath=True)`` with b one scalar (a times b's reciprocal): ``DIVISORS``
    random b (and 3, 1/3, 2^100) over every 16-bit a, or float32 a sampled as ``float_inputs`` does."""
    rng = np.random.default_rng(seed)
    t = numpy_dtype(dtype)
    if dtype in SIXTEEN_BIT:
        a = np.arange(1 << 16, dtype=np.uint16).view(t)
    else:
        a = float_inputs("reciprocal", dtype, samples // (2 * DIVISORS), rng)
    divisors = np.concatenate([[3.0, 1 / 3, 2.0 ** (15 if dtype == "float16" else 100)],
                               np.exp2(rng.uniform(-8, 8, DIVISORS - 3)) * rng.choice([-1, 1], DIVISORS - 3)])
    worst = None
    for b in divisors.astype(t):
        with np.errstate(all="ignore"):
            exact = a.astype(np.float64) / float(b)
        r = _fast_errors("fdiv", dtype, a, apply("fdiv", a, backend, True, float(b)), exact)
        if worst is None:
            worst = r
        else:
            worst = FastAccuracy("fdiv", dtype, worst.inputs + r.inputs, max(worst.max_ulp, r.max_ulp),
                                 max(worst.max_abs, r.max_abs),
                                 r.worst_input if r.max_ulp > worst.max_ulp else worst.worst_input,
                                 worst.flushed + r.flushed, worst.wrong_specials + r.wrong_specials,
                                 worst.overflow_edge + r.overflow_edge)
    return worst


def fastmath_table(samples: int = 1 << 24, seed: int = 0, backend: str = "cuda",
                   dtypes=("float32",) + SIXTEEN_BIT) -> Dict[str, Dict[str, FastAccuracy]]:
    """Every approximation fastmath=True runs, per dtype: {op: {dtype: FastAccuracy}} (op "fdiv":
    the division by one value)."""
    out = {op: {d: fastmath_accuracy(op, d, samples, seed, backend) for d in dtypes} for op in FASTMATH_OPS}
    out["fdiv"] = {d: fastmath_division(d, samples, seed, backend) for d in dtypes}
    return out
