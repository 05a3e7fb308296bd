"""ParallelGroup: every rank's tensor as the root sees it, and which rank is the root."""
from __future__ import annotations

import operator
from typing import List, Sequence

__all__ = ["ParallelGroup"]


class ParallelGroup:
    """The ranks of a collective, in one process: ``tensors[r]`` is rank r's tensor (NumPy
    arrays, or device arrays with rank r on its own GPU) and ``root`` the rank that gets the
    result. Rules a collective needs (one shape, dtype and strides for every rank) are checked
    when it runs.

    Parameters
    ----------
    tensors : sequence of arrays
        Rank r's tensor at index r; 1 to 5 dims (rows = dim -2, cols = dim -1).
    root : int
        The rank whose ``dst`` receives the result (0 <= root < len(tensors)).

    Examples
    --------
    >>> g = tp.comm.ParallelGroup([np.ones((2, 3), np.float32)] * 3, root=1)
    >>> g.size, g.root
    (3, 1)
    """

    def __init__(self, tensors: Sequence, root: int):
        if isinstance(tensors, (str, bytes)) or not hasattr(tensors, "__len__"):
            raise TypeError(f"tensors: expected a list of every rank's tensor, not {type(tensors).__name__}")
        if isinstance(root, bool) or not hasattr(root, "__index__"):
            raise TypeError(f"root: expected an int, not {root!r}")
        self.tensors: List = list(tensors)
        self.root = operator.index(root)
        if not self.tensors:
            raise ValueError("tensors: a group needs at least one rank's tensor")
        if not 0 <= self.root < len(self.tensors):
            raise ValueError(f"root: {self.root} is not a rank of this group of {len(self.tensors)} "
                             f"(0 .. {len(self.tensors) - 1})")

    @property
    def size(self) -> int:
        """The number of ranks."""
        return len(self.tensors)

    def __repr__(self) -> str:
        return f"ParallelGroup({self.size} ranks, root={self.root})"
