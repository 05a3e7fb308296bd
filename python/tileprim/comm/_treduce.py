"""tp.comm.treduce: every rank's tensor reduced into the root's dst, the root's value first and
then the other ranks ascending, chunked by ``tile``; in one process (a ParallelGroup of every
rank's tensor) or one process per rank (a distributed group)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from .._arrays.routing import host_views, refuse_gradients
from .._calls.plan import Plan
from ._group import DistributedGroup, ParallelGroup
from ._options import treduce_options
from ._timeout import call_timeout
from .one_process.calls import bound_treduce, run_treduce
from .processes.call import distributed_plan, distributed_treduce

__all__ = ["treduce"]


def treduce(group: ParallelGroup, dst=None, op: str = "sum", tile=(64, 256), pingpong: bool = True,
            valid: str = "dynamic", *, accumulate: Optional[str] = None, backend: Optional[str] = None,
            dispatch: Optional[str] = None, timeout: Optional[float] = None):
    """Reduce every rank's tensor into the root's ``dst``: at each element the root's value,
    then the other ranks ascending, folded in the operand dtype (bitwise reproducible, whatever
    algorithm, backend, tile or buffering runs).

    Parameters
    ----------
    group : ParallelGroup
        Every rank's tensor and the root; or, one process per rank, this rank's part
        (:meth:`ParallelGroup.distributed`), which every rank calls treduce with.
    dst : array, optional
        Where the result goes (the root's memory; any strides). Allocated when None. Ranks
        other than the root of a distributed group ignore it.
    op : {'sum', 'max', 'min'}
        max/min follow fmax/fmin: a NaN meeting a number gives the number.
    tile : (rows, cols)
        The chunk the reduction slides over the last two dims (outer dims are looped).
    pingpong : bool
        Two receive buffers (the next rank's chunk loads while the current one is folded).
    valid : {'dynamic', 'static'}
        'static' requires the tile to divide rows and cols; 'dynamic' allows a partial last chunk.
    accumulate : {None, 'float32'}
        Fold float16 / bfloat16 in float32, rounding once at the end.
    backend : {'cpu', 'cuda'}, optional
        Default: cpu for NumPy arrays and torch CPU tensors (read through NumPy views of their
        memory; the result a torch tensor), cuda for device arrays.
    dispatch : {'root_pull', 'scatter_gather', 'chain'}, optional
        Force an algorithm (default: the one the cost model expects fastest; ``tp.plan`` shows
        every algorithm's estimate and why the others were not taken).
    timeout : float, optional
        Distributed groups: seconds to wait for the other ranks before raising
        ``tp.comm.CommTimeout`` (default: the communicator's, 300 s). In one process the ranks
        are at hand and nothing waits for them; a given timeout is checked all the same.

    Returns
    -------
    array or None
        ``dst`` (allocated at the root when None was given); None on the other ranks of a
        distributed group, once the root is done with their data.

    Raises
    ------
    ValueError, TypeError
        Before anything is written: ranks of different shape, dtype or strides, a bad root,
        a dst of the wrong shape, dtype or device or overlapping a non-root source, bad options.
        Distributed: the same error on every rank, also when the ranks' calls disagree.
    tp.DispatchError
        When no algorithm accepts the call (e.g. scatter_gather with 2 ranks).
    tp.comm.CommError, tp.comm.CommTimeout
        Distributed: a rank exited, or did not arrive within ``timeout``.

    Examples
    --------
    >>> xs = [np.full((2, 3), r, np.float32) for r in range(4)]
    >>> tp.comm.treduce(tp.comm.ParallelGroup(xs, root=0), op="sum", tile=(1, 2))
    array([[6., 6., 6.],
           [6., 6., 6.]], dtype=float32)
    """
    if isinstance(group, DistributedGroup):
        refuse_gradients("treduce", [group.tensor, dst])
        # its options are checked among the rank's own checks, which every rank hears of
        return distributed_treduce(group, dst, call_timeout(timeout, group.comm.timeout), op=op, tile=tile,
                                   pingpong=pingpong, valid=valid, accumulate=accumulate, backend=backend,
                                   dispatch=dispatch)
    if timeout is not None:  # nothing waits in one process, yet a bad timeout is a bad call
        call_timeout(timeout, None)
    _check_group(group)
    options = treduce_options(op, group.root, tile, pingpong, valid, accumulate, backend, dispatch)
    tensors, dst_view, library = _host_viewed(group, dst)
    if library is None:
        return run_treduce(tensors, dst, options)
    refuse_gradients("treduce", [*group.tensors, dst])
    out = run_treduce(tensors, dst_view, options)
    return dst if dst is not None else library.from_host_view(out)


def _plan(group: ParallelGroup, dst=None, op: str = "sum", tile=(64, 256), pingpong: bool = True,
          valid: str = "dynamic", *, accumulate: Optional[str] = None, backend: Optional[str] = None,
          dispatch: Optional[str] = None, timeout: Optional[float] = None) -> Plan:
    if isinstance(group, DistributedGroup):
        return distributed_plan(group, dst, op=op, tile=tile, pingpong=pingpong, valid=valid, accumulate=accumulate,
                                dispatch=dispatch)
    _check_group(group)
    options = treduce_options(op, group.root, tile, pingpong, valid, accumulate, backend, dispatch)
    tensors, dst, _ = _host_viewed(group, dst)
    return bound_treduce(tensors, dst, options).plan


def _host_viewed(group: ParallelGroup, dst):
    """(the ranks' arrays, dst, None), or where they are a library's host arrays (torch's CPU
    tensors) NumPy views of them and that library: the ranks meet in host memory, as NumPy arrays do."""
    values = [*group.tensors, dst]
    viewed = None if all(type(x) is np.ndarray or x is None for x in values) else host_views(values)
    if viewed is None:
        return group.tensors, dst, None
    (*tensors, dst_view), library = viewed
    return tensors, dst_view, library


def _check_group(group) -> None:
    if not isinstance(group, ParallelGroup):
        raise TypeError(f"group: expected a tp.comm.ParallelGroup, not {type(group).__name__}")


treduce._tp_planner = _plan  # tp.plan(tp.comm.treduce, group, ...)
treduce._tp_collective = "treduce"  # tp.variants(tp.comm.treduce)
