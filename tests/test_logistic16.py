"""The 16-bit silu and sigmoid's fast path (transcendental16.cuh, `logistic`): a NumPy
re-implementation of its float steps (float32 adds, products and fmas, each rounded once) and of
its decision, over every 16-bit input. The fast path must be taken by at least 99 % of them (and
by 99.9 % of normally distributed inputs), its result must round to tileprim's bits wherever it is
taken, and its error must stay within the bound the header states (which the margin of its
decision covers)."""
import pathlib
import re

import numpy as np
import pytest

import tileprim as tp
from conftest import NP, fma32

HEADER = (pathlib.Path(tp.__file__).parent / "include" / "tileprim" / "transcendental16.cuh").read_text()
FORMAT = {"float16": "Half", "bfloat16": "BFloat16"}
BOUND_ULPS = {"float16": 10.0, "bfloat16": 13.0}  # the header's error bounds, the product's rounding in
F32 = np.float32


def _format_text(dtype: str) -> str:
    return HEADER[HEADER.index(f"struct {FORMAT[dtype]} {{"):][:3000]


def _constant(dtype: str, name: str) -> float:  # kSiluZero, kExpZero: decimal literals
    return float(re.search(name + r" = (-?[0-9.]+)f", _format_text(dtype)).group(1))


def _coefficients():
    body = re.search(r"float exp_near_zero\(float r\) \{.*?horner\(r, (.*?)\);", HEADER, re.S).group(1)
    return [float.fromhex(c.strip().rstrip("f")) for c in body.split(",")]


def _bits(x):
    return np.asarray(x, F32).view(np.uint32)


def fast_path(op: str, dtype: str, x):
    """(y, taken): the fast path's float results and where its decision takes them."""
    f16 = dtype == "float16"
    zero = F32(_constant(dtype, "kSiluZero" if op == "silu" else "kExpZero"))
    offset = F32(0.0 if f16 else 15.0)
    with np.errstate(all="ignore"):
        minus_abs = -np.abs(x)
        m = np.fmax(minus_abs, zero) if op == "silu" else np.where(minus_abs < zero, zero, minus_abs)
        m = m.astype(F32)
        shifter = F32(2.0 ** 23 * 1.5) + offset  # kShifter + kPow2Offset
        shifted = fma32(m, F32(float.fromhex("0x1.715476p+0")), shifter)
        k = (shifted - shifter).astype(F32)
        r = fma32(k, F32(-float.fromhex("0x1.62e430p-1")), m)
        c = _coefficients()
        p = F32(c[-1])
        for ci in c[-2::-1]:
            p = fma32(p, r, F32(ci))
        scale = ((_bits(shifted) << np.uint32(23)) + np.uint32(0x3F800000)).view(F32)
        unoffset = F32(2.0 ** -float(offset))
        d = (F32(1) + (p * scale) * unoffset).astype(F32)
        y0 = fma32(F32(-8.0) / F32(17), d, F32(24.0) / F32(17))
        h0 = fma32(-d, y0, F32(1))
        y1 = fma32(y0, fma32(h0, h0, h0), y0)
        inv = fma32(y1, fma32(-d, y1, F32(1)), y1)
        negative = x < 0
        coefficient, positive = (m, x) if op == "silu" else (F32(1), F32(1))
        if f16:
            y = (np.where(negative, coefficient * (p * scale), positive).astype(F32) * inv).astype(F32)
            check = y * F32(2.0 ** -112)
        else:
            q = (np.where(negative, coefficient * p, positive).astype(F32) * inv).astype(F32)
            y = np.where(negative, (q * scale) * unoffset, q).astype(F32)
            check = y
    low_bits = 0x1FFF if f16 else 0xFFFF
    margin = int(re.search(r"kMargin = (\d+)u", _format_text(dtype)).group(1))
    midpoint = (low_bits >> 1) + 1
    outside = low_bits & ~(2 * margin - 1)
    taken = ((_bits(check).astype(np.int64) + (margin - midpoint)) & outside) != 0
    return y, taken, check


@pytest.mark.parametrize("op", ["silu", "sigmoid"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fast_path_is_taken_by_99_percent_and_rounds_as_tileprim(op, dtype):
    x16 = np.arange(1 << 16, dtype=np.uint16).view(NP[dtype])
    x = x16.astype(F32)
    y, taken, check = fast_path(op, dtype, x)
    assert taken.mean() >= 0.99, (op, dtype, int((~taken).sum()))
    # and by 99.9 % of normally distributed ones (activations): a miss sends its whole warp down
    # the exact path, so the rate among such inputs sets the map's speed (the header's note)
    normal = np.random.default_rng(0).standard_normal(1 << 20).astype(NP[dtype]).view(np.uint16)
    assert taken[normal].mean() >= 0.999, (op, dtype, float(taken[normal].mean()))

    want = getattr(tp, op)(x16.reshape(-1, 8), batch_dims=1, backend="cpu").reshape(-1)
    got = y.astype(NP[dtype])
    nan = np.isnan(got.astype(F32)) & np.isnan(want.astype(F32))
    same = (got.view(np.uint16) == want.view(np.uint16)) | nan
    assert same[taken].all(), x[taken & ~same][:8]

    # the stated bound, in ulps of the check value's float grid, against float64 where the result
    # is neither clamped nor NaN nor zero
    with np.errstate(all="ignore"):
        xd = x.astype(np.float64)
        sigmoid = 1.0 / (1.0 + np.exp(-xd))
        exact = (xd * sigmoid if op == "silu" else sigmoid) * (2.0 ** -112 if dtype == "float16" else 1.0)
        c = check.astype(np.float64)
        exponent = np.maximum(np.floor(np.log2(np.abs(c))), -126.0)
        ulps = np.abs(c - exact) / 2.0 ** (exponent - 23)
    zero = _constant(dtype, "kSiluZero" if op == "silu" else "kExpZero")
    kept = np.isfinite(xd) & (xd > zero) & (c != 0) & np.isfinite(ulps)
    assert kept.sum() > 3 << 14  # most of them
    assert ulps[kept].max() <= BOUND_ULPS[dtype], (op, dtype, float(ulps[kept].max()))
    # and the decision's margin lies beyond every input's error, so that no taken result can round
    # the other way of a midpoint (float16's margin rests on this: every input is here)
    margin = int(re.search(r"kMargin = (\d+)u", _format_text(dtype)).group(1))
    assert ulps[kept].max() < margin, (op, dtype, float(ulps[kept].max()), margin)
