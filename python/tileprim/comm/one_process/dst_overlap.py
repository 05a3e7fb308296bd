"""The errors of treduce's rule for where dst may lie. The rule itself is the C++ core's
(_C.treduce_dst_overlaps, csrc/variants/comm/dst_overlap.h), which every path asks: it names
the ranks whose source dst may meet; here two NumPy arrays at hand get the exact look."""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["raise_dst_overlap"]


def raise_dst_overlap(met: Sequence[int], root: int, arrays: Sequence, dst) -> None:
    """Raises ValueError for the first rank of `met` (as _C.treduce_dst_overlaps gives them)
    whose source dst shares bytes with. arrays[r]: rank r's array where this process holds it,
    else None; two NumPy arrays whose extents meet may still share no byte (interleaved)."""
    for r in met:
        x = arrays[r]
        if isinstance(dst, np.ndarray) and isinstance(x, np.ndarray) and not np.shares_memory(dst, x, max_work=1 << 20):
            continue
        if r != root:
            raise ValueError(f"dst: overlaps tensors[{r}], a non-root rank's source that the reduction reads")
        raise ValueError("dst: overlaps the root's tensor without being it; reduce in place with dst=tensors[root]")
