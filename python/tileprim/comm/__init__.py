"""Collectives across ranks: ``treduce``, the reduce-to-root of the specification.

    g = tp.comm.ParallelGroup([x0, x1, x2, x3], root=0)   # rank r's tensor (NumPy, or on GPU r)
    out = tp.comm.treduce(g, op="sum", tile=(64, 256))      # the root's value, then ranks ascending
    tp.plan(tp.comm.treduce, g, op="sum", tile=(64, 256))  # which algorithm, why, the order
"""
from ._group import ParallelGroup
from ._treduce import treduce

__all__ = ["ParallelGroup", "treduce"]
