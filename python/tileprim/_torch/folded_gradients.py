"""A norm's weight and bias gradients summed in the backward's own kernel. A weight (n,) broadcast over
rows (R, n) gets a gradient row per row, which ``sum_to`` sums; its first level folds chunks of C
consecutive rows, each in order from -0.0 in the wide float. Where that fold is so (``folded_run``),
the derived backward's kernel returns those gradients already folded (``Program._run``'s ``folded``:
each block takes C consecutive rows one at a time and sums their gradients in shared memory) and
``sums_from_folds`` goes on from the chunks' sums: the bits of writing the rows and folding them after
(as the CPU backend does), without writing them and with one program call fewer. A gradient the
backward passes on unchanged (a bias's: the result's gradient itself) is returned widened by the
backward, to be folded beside the others."""
from __future__ import annotations

import inspect
import os
from typing import Optional

from .._ops import names as tp
from .sum_to import _wide, folded_run, sums_from_folds, sums_to

__all__ = ["FoldedBackward", "folded_backward"]

# a folded output's sums take 4 bytes an element of the kernel's shared memory, beside its own tiles
_MOST_ELEMENTS = 8192
# Off unless TILEPRIM_FOLDED_GRADIENTS=1: the folded kernels give the unfolded path's bits, but on an
# H200 LayerNorm's folded backward is slower (docs/benchmarks.md, session 18)
ENABLED = os.environ.get("TILEPRIM_FOLDED_GRADIENTS") == "1"


class FoldedBackward:
    """The backward program with its broadcast weights' gradients folded over runs of ``run`` rows."""

    def __init__(self, program, run: int, folded: list, places: list, dtypes: list):
        self.program, self.run = program, run
        self.folded = folded  # the program's outputs returned folded
        self.places = places  # per wanted gradient: ("argument", k), ("result", j) or ("folded", j)
        self.dtypes = dtypes  # per wanted gradient: the dtype of its rows (a folded one's sums round to it)

    def gradients(self, wanted: list, inputs, arguments, options: dict) -> tuple:
        made = self.program._run(arguments, options["batch_dims"], options["scope"], options["backend"],
                                 options["target"], options["fastmath"], None, (self.run, tuple(self.folded)))
        made = list(made) if isinstance(made, tuple) else [made]
        out = [None] * len(inputs)
        alike = {}  # folded gradients of one dtype and shape: summed on together, two a kernel
        for i, (kind, k), dtype in zip(wanted, self.places, self.dtypes):
            if kind == "folded":
                alike.setdefault((dtype, tuple(inputs[i].shape)), []).append((i, made[k]))
                continue
            g = arguments[k] if kind == "argument" else made[k]
            out[i] = sums_to([g], inputs[i].shape, options["backend"], options["target"])[0]
        for (dtype, shape), pairs in alike.items():
            summed = sums_from_folds([s for _, s in pairs], shape, dtype, options["backend"], options["target"])
            for (i, _), s in zip(pairs, summed):
                out[i] = s
        return tuple(out)


def folded_backward(program, wanted: list, sources: list, inputs, arguments, options: dict) -> Optional[FoldedBackward]:
    """The backward with the gradients of weights (n,) over rows (R, n) folded, where ``folded_run``
    allows it and n fits the kernel's shared memory; else None (the rows written and summed after)."""
    if program is None or arguments[0].device.type != "cuda":
        return None  # the CPU backend sums the rows it returns (sum_to), in the same order
    prepared = program._prepared(arguments, options["batch_dims"], options["scope"], options["backend"],
                                 options["target"], options["fastmath"])
    results = getattr(prepared, "inner", prepared).results  # torch CPU tensors: the call on their NumPy views
    rows = {}  # per wanted position: (R, n) where its gradient is rows of a weight
    for position, (i, (kind, k)) in enumerate(zip(wanted, sources)):
        shape, _ = (tuple(arguments[k].shape), None) if kind == "argument" else results[k]
        if inputs[i].dim() == 1 and len(shape) == 2 and shape[1:] == tuple(inputs[i].shape):
            rows[position] = shape
    if not rows or len(set(rows.values())) != 1:
        return None
    b, n = next(iter(rows.values()))
    run = folded_run(b, n)
    if run is None or n > _MOST_ELEMENTS:
        return None
    # a result folded must be a weight's gradient alone: no other gradient reads its rows
    kept = {k for position, (kind, k) in enumerate(sources) if kind == "result" and position not in rows}
    widened, places, dtypes, folded = [], [], [], []
    for position, (kind, k) in enumerate(sources):
        if position in rows and kind == "argument":
            if k not in widened:
                widened.append(k)
            places.append(("folded", len(results) + widened.index(k)))
            dtypes.append(str(arguments[k].dtype).replace("torch.", ""))
        elif position in rows and k not in kept:
            places.append(("folded", k))
            dtypes.append(results[k][1])
            folded.append(k)
        else:
            places.append((kind, k))
            dtypes.append(None)
    folded += [len(results) + m for m in range(len(widened))]
    if not folded:
        return None
    made = type(program)(_widening(program._fn, widened), program._scope, program._storage, program._staging)
    return FoldedBackward(made, run, sorted(set(folded)), places, dtypes)


def _widening(body, arguments: list):
    """``body`` returning besides the arguments at these positions, widened to the float they are summed in."""
    def widened(*tiles):
        made = body(*tiles)
        return tuple(made) + tuple(tp.cast(tiles[k], _wide(tiles[k])) for k in arguments)

    widened.__name__ = widened.__qualname__ = body.__name__
    widened.__signature__ = inspect.signature(body)
    return widened
