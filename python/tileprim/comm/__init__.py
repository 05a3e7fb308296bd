"""Collectives across ranks: ``treduce``, the reduce-to-root of the specification.

    g = tp.comm.ParallelGroup([x0, x1, x2, x3], root=0)   # rank r's tensor (NumPy, or on GPU r)
    out = tp.comm.treduce(g, op="sum", tile=(64, 256))      # the root's value, then ranks ascending
    tp.plan(tp.comm.treduce, g, op="sum", tile=(64, 256))  # which algorithm, why, the order

    comm = tp.comm.init()                                   # one process per rank (torchrun, mpirun, init_file)
    g = tp.comm.ParallelGroup.distributed(x, root=0, comm=comm)
    out = tp.comm.treduce(g, op="sum")                      # the root gets dst, the others None
"""
from ._communicator import Communicator, init
from ._errors import CallTypeError, CommError, CommTimeout
from ._group import DistributedGroup, ParallelGroup
from ._treduce import treduce

__all__ = ["ParallelGroup", "DistributedGroup", "Communicator", "init", "treduce", "CommError", "CommTimeout",
           "CallTypeError"]
