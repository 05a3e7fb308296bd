"""The GPU's division of many floats by one (numeric.cuh's FloatDivisor): y = RN(1/b), q = RN(a y),
then RN(q + RN(a - b q) y) is fdiv's RN(a/b) wherever its range check lets it run. A proof in two
parts, on the significands a, b in [1, 2) (the steps scale exactly by powers of two while every
value stays normal, which the range check ensures; signs are symmetric):

- the bound: before its last rounding the value lies within (a/b) 2^-46 (1 + 2^-24) of a/b (each
  of y, q and the remainder carries one rounding of relative error 2^-24), checked on samples in
  exact rationals;
- the pairs that bound leaves open: a/b - m for a midpoint m = odd / 2^k (k = 24 for quotients in
  [1, 2), 25 in [1/2, 1)) is N / (2^k B) with the integer N = 2^k A - odd B (A, B the significands
  as integers), so only |N| <= 4 (k = 24) or 8 (k = 25) can round otherwise. For each B those A
  solve 2^k A = N (mod B); every such pair, 127,925,210 of them, is run through the steps in
  NumPy (each fma rounded once) and gives RN(a/b)."""
from fractions import Fraction

import numpy as np
import pytest

from conftest import fma32

F32 = np.float32
SIGNIFICANDS = (1 << 23, 1 << 24)  # A, B: a = A 2^-23, b = B 2^-23
OPEN = ((24, 4), (25, 8))          # (k, largest |N|) the bound leaves open


def _divided(a, b):
    """The GPU's steps in float32, each rounded once."""
    y = F32(1) / b
    q = a * y
    return fma32(fma32(-q, b, a), y, q)


def _open_pairs(bs: np.ndarray, k: int, most: int):
    """(A, B): every A in [2^23, 2^24) with |2^k A - odd B| <= most for some odd multiple of each B."""
    found_a, found_b = [], []
    for zeros in range(4):  # B = 2^zeros B', B' odd: N must be a multiple of 2^zeros
        with_zeros = bs[(bs & ((1 << (zeros + 1)) - 1)) == (1 << zeros)]
        if not len(with_zeros):
            continue
        odd = with_zeros >> zeros
        inverse = np.array([pow(2, -(k - zeros), int(b)) if b > 1 else 0 for b in odd], dtype=np.int64)
        for n in range(-most, most + 1):
            if n == 0 or n % (1 << zeros):
                continue
            first = ((n >> zeros) % odd) * inverse % odd  # A = first (mod B')
            steps = -(-(SIGNIFICANDS[0] - first) // odd)
            for more in range((1 << (zeros + 1)) + 1):  # B' >= 2^(23 - zeros): at most 2^(zeros + 1) in range
                a = first + (steps + more) * odd
                inside = (a >= SIGNIFICANDS[0]) & (a < SIGNIFICANDS[1])
                found_a.append(a[inside])
                found_b.append(with_zeros[inside])
    empty = [np.zeros(0, np.int64)]
    return np.concatenate(found_a or empty), np.concatenate(found_b or empty)


def _as_floats(integers: np.ndarray) -> np.ndarray:
    return (integers.astype(np.float64) * 2.0 ** -23).astype(F32)


def near_midpoints(b_int: int):
    """Numerators a in [1, 2) whose quotients by b = b_int 2^-23 lie nearest a rounding midpoint (b's
    open pairs)."""
    return np.concatenate([_as_floats(_open_pairs(np.array([b_int], dtype=np.int64), k, most)[0]) for k, most in OPEN])


def test_every_pair_near_a_midpoint_divides_to_the_rounded_quotient():
    pairs = wrong = 0
    for start in range(SIGNIFICANDS[0], SIGNIFICANDS[1], 1 << 18):
        bs = np.arange(start, start + (1 << 18), dtype=np.int64)
        for k, most in OPEN:
            a_int, b_int = _open_pairs(bs, k, most)
            a, b = _as_floats(a_int), _as_floats(b_int)
            wrong += int(np.count_nonzero(_divided(a, b) != a / b))
            pairs += len(a)
    assert wrong == 0
    assert pairs == 127_925_210  # the count the header states


@pytest.mark.parametrize("b_int", [1 << 23, (1 << 23) + 1, (1 << 23) + 4, (1 << 24) - 1, (1 << 24) - 8, 11184811,
                                   12582917, 15000011])
def test_the_open_pairs_are_every_pair_that_close_to_a_midpoint(b_int):
    """Against a search over every A for the given B."""
    a_all = np.arange(*SIGNIFICANDS, dtype=np.int64)
    for k, most in OPEN:
        listed = set(_open_pairs(np.array([b_int], dtype=np.int64), k, most)[0].tolist())
        scaled = a_all << k
        nearest = scaled // b_int
        for odd in (nearest - 1, nearest, nearest + 1, nearest + 2):
            n = scaled - odd * b_int
            close = a_all[(odd % 2 == 1) & (np.abs(n) <= most)]
            assert set(close.tolist()) <= listed, (k, sorted(set(close.tolist()) - listed)[:4])


def test_the_value_before_its_rounding_lies_within_the_bound(rng):
    a = _as_floats(rng.integers(*SIGNIFICANDS, 4000))
    b = _as_floats(rng.integers(*SIGNIFICANDS, 4000))
    y = F32(1) / b
    q = a * y
    r = fma32(-q, b, a)
    bound = Fraction(2) ** -46 * (1 + Fraction(2) ** -24)
    worst = max(abs(Fraction(float(qi)) + Fraction(float(ri)) * Fraction(float(yi)) - Fraction(float(ai)) / Fraction(float(bi)))
                / (Fraction(float(ai)) / Fraction(float(bi))) for ai, bi, yi, qi, ri in zip(a, b, y, q, r))
    assert 0 < worst <= bound


def test_the_steps_without_their_correction_would_round_otherwise(rng):
    """The enumeration can fail: RN(a y) alone differs from RN(a/b) on about a quarter of pairs."""
    a = _as_floats(rng.integers(*SIGNIFICANDS, 100_000))
    b = _as_floats(rng.integers(*SIGNIFICANDS, 100_000))
    assert np.count_nonzero(a * (F32(1) / b) != a / b) > 10_000
    assert np.count_nonzero(_divided(a, b) != a / b) == 0
