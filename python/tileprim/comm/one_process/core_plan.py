"""The C++ core's bound plan of a treduce (validated, dispatched and cached by call signature
there): from the ranks' and dst's TileRefs, or, for a rank that runs on pointers only (the
root checked the call), from their layout alone."""
from __future__ import annotations

import dataclasses
import functools
from typing import List, NamedTuple, Tuple

import tileprim._C as _C
from ..._platform.backends import default_target
from .._options import TreduceOptions

__all__ = ["prepare", "RanksLayout", "plan_for_layout", "fold_options", "contiguous_plan"]


def prepare(ranks: List["_C.TileRef"], dst: "_C.TileRef", backend: str, devices: List[int],
            options: TreduceOptions):
    """The core's bound plan of a treduce of these ranks into dst (cuda: on these devices)."""
    call = _C.treduce_call(ranks, dst, options.core(), options.dispatch or "")
    return _C.prepare(call, default_target(backend, devices[options.root] if devices else 0), backend, devices)


class RanksLayout(NamedTuple):
    """The ranks of a call laid out alike on one GPU, and dst: the signature of arrays a rank
    that runs on pointers has only the layout of."""

    ranks: int
    dtype: str
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]  # every rank's, in elements
    dst_strides: Tuple[int, ...]
    device: int


@functools.lru_cache(maxsize=256)
def plan_for_layout(options: TreduceOptions, layout: RanksLayout):
    """The core's bound plan of a treduce (cuda) of ranks and dst laid out as `layout` says."""
    refs = [_C.TileRef(f"tensors[{r}]", layout.dtype, list(layout.shape), "global", None, layout.device,
                       list(layout.strides)) for r in range(layout.ranks)]
    dst = _C.TileRef("dst", layout.dtype, list(layout.shape), "global", None, layout.device, list(layout.dst_strides))
    return prepare(refs, dst, "cuda", [layout.device] * layout.ranks, options)


def fold_options(options: TreduceOptions) -> TreduceOptions:
    """The options of a call's fold over contiguous buffers a transport staged (contiguous_plan):
    root_pull's, whatever the call's algorithm, with a partial last chunk allowed."""
    return dataclasses.replace(options, valid="dynamic", dispatch="root_pull")


def contiguous_plan(options: TreduceOptions, ranks: int, n: int, dtype: str, device: int):
    """The bound plan of a treduce of `ranks` buffers of n contiguous elements on this rank's
    GPU into one more (options: fold_options's): for a transport that stages the ranks' data
    itself, where there are only its buffers' pointers."""
    return plan_for_layout(options, RanksLayout(ranks, dtype, (n,), (1,), (1,), device))
