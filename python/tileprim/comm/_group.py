"""ParallelGroup: every rank's tensor as the root sees it, and which rank is the root; or, one
process per rank, this rank's tensor and the communicator that reaches the others."""
from __future__ import annotations

import operator
from typing import Sequence, Tuple

from ._communicator import Communicator, default_communicator

__all__ = ["ParallelGroup", "DistributedGroup"]


def _set(group, **attributes) -> None:
    """A group's attributes, set once at construction."""
    for name, value in attributes.items():
        object.__setattr__(group, name, value)


class ParallelGroup:
    """The ranks of a collective, in one process: ``tensors[r]`` is rank r's tensor (NumPy
    arrays, or device arrays with rank r on its own GPU) and ``root`` the rank that gets the
    result. Rules a collective needs (one shape, dtype and strides for every rank) are checked
    when it runs. A group is immutable: setting ``root`` or ``tensors`` raises AttributeError
    (make a new group); ``tensors`` is the group's own tuple (no rank can be added or removed),
    whose arrays every call checks.

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
        _set(self, tensors=tuple(tensors), root=operator.index(root))
        self.tensors: Tuple
        if not self.tensors:
            raise ValueError("tensors: a group needs at least one rank's tensor")
        if not 0 <= self.root < len(self.tensors):
            raise ValueError(f"root: {self.root} is not a rank of this group of {len(self.tensors)} "
                             f"(0 .. {len(self.tensors) - 1})")

    @classmethod
    def distributed(cls, x, root: int, comm=None) -> "DistributedGroup":
        """This process's part of a group whose ranks are processes: ``x`` is this rank's tensor,
        ``comm`` (default: the last :func:`tp.comm.init`'s) reaches the others. Every rank calls
        ``treduce`` on its group; the root gets ``dst``, the others ``None``.

        Examples
        --------
        >>> comm = tp.comm.init(backend="cpu")   # rank 0 of 1 when started alone
        >>> g = tp.comm.ParallelGroup.distributed(np.ones((2, 3), np.float32), root=0, comm=comm)
        >>> g.rank, g.size, g.root
        (0, 1, 0)
        >>> comm.close()
        """
        return DistributedGroup(x, root, comm)

    @property
    def size(self) -> int:
        """The number of ranks."""
        return len(self.tensors)

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: {name} cannot be set (its ranks and root were "
                             "checked together); make a new group")

    def __delattr__(self, name: str) -> None:
        self.__setattr__(name, None)

    def __repr__(self) -> str:
        return f"ParallelGroup({self.size} ranks, root={self.root})"


class DistributedGroup(ParallelGroup):
    """A group whose ranks are processes: this rank's ``tensor``, the ``comm`` that reaches the
    others, its ``rank`` and the ``root``. Made by :meth:`ParallelGroup.distributed`."""

    def __init__(self, x, root: int, comm=None):  # pylint: disable=super-init-not-called
        if comm is None:
            comm = default_communicator()
        if not isinstance(comm, Communicator):
            raise TypeError(f"comm: expected a communicator from tp.comm.init(), not {type(comm).__name__}")
        if isinstance(root, bool) or not hasattr(root, "__index__"):
            raise TypeError(f"root: expected an int, not {root!r}")
        _set(self, tensor=x, comm=comm, root=operator.index(root))
        if not 0 <= self.root < comm.world_size:
            raise ValueError(f"root: {self.root} is not a rank of this job of {comm.world_size} "
                             f"(0 .. {comm.world_size - 1})")

    @property
    def rank(self) -> int:
        """This process's rank."""
        return self.comm.rank

    @property
    def size(self) -> int:
        return self.comm.world_size

    def __repr__(self) -> str:
        return f"ParallelGroup.distributed(rank {self.rank} of {self.size}, root={self.root})"
