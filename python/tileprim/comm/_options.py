"""TreduceOptions: a treduce call's options as one value, checked once where the call enters
(tp.comm.treduce, tp.plan) and passed whole from there: to the checks, to every memo (each keys
by it and the arrays' signature) and to the C++ core (``core()``, read there by field). The
call's timeout is not one of them: it bounds this call's waits and decides nothing that a memo
keeps, so calls that differ only in it share everything."""
from __future__ import annotations

import dataclasses
import operator
from typing import Dict, Optional, Tuple

import numpy as np

import tileprim._C as _C
from .._checks import OPTIONAL_STR, expect

__all__ = ["TreduceOptions", "treduce_options"]

_TILE_MAX = (1 << 63) - 1  # a tile past the tensor is one chunk of it; beyond int64 nothing is a tile


@dataclasses.dataclass(frozen=True)
class TreduceOptions:
    """What a treduce call asked for besides its tensors (each field as tp.comm.treduce takes
    it, defaults there; see there), checked and normalised: ``tile`` a tuple of ints,
    ``pingpong`` a bool, the texts plain str. Immutable and hashable: equal options are one
    memo key."""

    op: str
    root: int
    tile: Tuple[int, int]
    pingpong: bool
    valid: str
    accumulate: Optional[str]
    backend: Optional[str]
    dispatch: Optional[str]
    transport: str  # '' in one process; across processes the communicator's ('shm', 'cuda_ipc', 'nccl')

    def __post_init__(self):
        expect(self.op, str, "op", "'sum', 'max' or 'min'")
        tile = _checked_tile(self.tile)
        expect(self.pingpong, (bool, np.bool_), "pingpong", "True or False")
        expect(self.valid, str, "valid", "'dynamic' or 'static'")
        expect(self.accumulate, OPTIONAL_STR, "accumulate", "None or 'float32'")
        if self.accumulate == "":
            raise ValueError("accumulate: '' is not an accumulator dtype; use None (the operand dtype) or 'float32'")
        expect(self.dispatch, OPTIONAL_STR, "dispatch", "a variant name")
        if self.dispatch == "":
            raise ValueError("dispatch: '' is not a variant name; use None to let dispatch choose")
        normal = {"tile": tile, "pingpong": bool(self.pingpong), "root": operator.index(self.root)}
        for name in ("op", "valid", "accumulate", "backend", "dispatch", "transport"):
            value = getattr(self, name)
            normal[name] = str(value) if isinstance(value, str) else value  # np.str_ prints as itself
        for name, value in normal.items():
            object.__setattr__(self, name, value)
        # every memo hashes it on every call: once is enough
        object.__setattr__(self, "_hash", hash(tuple(getattr(self, f.name) for f in dataclasses.fields(self))))

    def __hash__(self) -> int:
        return self._hash

    def core(self) -> "_C.TreduceOptions":
        """The C++ core's TreduceOptions (backend and dispatch travel apart there: the context's
        backend, the call's forced variant)."""
        return _C.TreduceOptions(op=self.op, root=self.root, tile_rows=self.tile[0], tile_cols=self.tile[1],
                                 pingpong=self.pingpong, valid=self.valid, accumulate=self.accumulate or "",
                                 transport=self.transport)


def _checked_tile(tile) -> Tuple[int, int]:
    if not isinstance(tile, (tuple, list)) or len(tile) != 2:
        raise ValueError(f"tile: expected (rows, cols), not {tile!r}")
    try:
        rows_cols = tuple(operator.index(t) for t in tile if not isinstance(t, bool))
    except TypeError:
        raise TypeError(f"tile: expected two ints (rows, cols), not {tile!r}") from None
    if len(rows_cols) != 2:
        raise TypeError(f"tile: expected two ints (rows, cols), not {tile!r}")
    if not all(1 <= t <= _TILE_MAX for t in rows_cols):
        raise ValueError(f"tile: {tile!r} needs rows and cols from 1 to 2**63 - 1")
    return rows_cols  # type: ignore[return-value]


# The options of the calls so far, by the arguments as given and their types where == would
# blur them (1 == 1.0 == True, yet only 1 is a tile size and only True a pingpong): a repeated
# call's options are one lookup, not a check.
_MADE: Dict[tuple, TreduceOptions] = {}
_MADE_LIMIT = 256


def treduce_options(op, root: int, tile, pingpong, valid, accumulate, backend, dispatch,
                    transport: str = "") -> TreduceOptions:
    """The checked options of a call (ValueError / TypeError naming the option otherwise)."""
    rows, cols = tile if type(tile) in (tuple, list) and len(tile) == 2 else (tile, None)
    key = (op, root, rows, cols, pingpong, valid, accumulate, backend, dispatch, transport,
           type(rows), type(cols), type(pingpong), type(root))
    try:
        options = _MADE.get(key)
    except TypeError:  # an unhashable option: the checks name it
        return TreduceOptions(op, root, tile, pingpong, valid, accumulate, backend, dispatch, transport)
    if options is None:
        options = TreduceOptions(op, root, tile, pingpong, valid, accumulate, backend, dispatch, transport)
        if len(_MADE) >= _MADE_LIMIT:
            _MADE.clear()
        _MADE[key] = options
    return options
