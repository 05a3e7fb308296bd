"""Backends: which one serves a call, which architecture it models, and running a plan there."""
from __future__ import annotations

import math

import numpy as np

from . import _C
from ._arrays import numpy_dtype

__all__ = ["resolve_backend", "default_target", "run_plan", "BACKENDS"]

BACKENDS = ("cpu", "cuda")


def cuda_status():
    """(usable, reason): whether the CUDA backend can run kernels here."""
    return False, "the CUDA backend is not built into this version of tileprim"


def resolve_backend(backend) -> str:
    if backend is None:
        return "cuda" if cuda_status()[0] else "cpu"
    if backend not in BACKENDS:
        raise ValueError(f"backend: {backend!r} is not 'cpu' or 'cuda'")
    if backend == "cuda":
        usable, reason = cuda_status()
        if not usable:
            raise ValueError(f"backend: 'cuda' is not usable here: {reason}")
    return backend


def default_target(backend: str) -> str:
    """The architecture dispatch models when target= is not given: none on the CPU."""
    return ""


def run_plan(prep, out, accum: bool):
    """Runs a prepared call; returns the result as a new array shaped prep.result_shape."""
    tiles = math.prod(prep.batch_shape)
    out_dtype = numpy_dtype(prep.out_dtype)
    out_tile = math.prod(prep.plan._core.call.output.shape)
    buffer = np.full((tiles, out_tile), np.nan, dtype=out_dtype)  # poison: unwritten slots show
    if accum:
        buffer[...] = np.asarray(out, dtype=out_dtype).reshape(tiles, out_tile)
    inputs = [None if o.scalar else np.ascontiguousarray(o.array).reshape(tiles, -1) for o in prep.operands]
    if tiles:
        _C.run_cpu(prep.plan._core, inputs, buffer, tiles)
    return buffer.reshape(prep.result_shape)
