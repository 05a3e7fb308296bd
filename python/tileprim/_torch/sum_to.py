"""A broadcast operand's gradient summed back to its shape with tileprim's own reductions (torch's
``sum_to_size`` sums in one order on its CPU and another on CUDA, so a norm's weight gradient would
not be the same bits on both, DESIGN §3). In float32 for 16-bit gradients (float64 for float64),
rounded once to the gradient's dtype at the end.

Summing down a batch of rows (a norm's weight over 8192-32768 rows) takes two program calls. First
whole chunks of rows are folded: each instance a CTA holding a chunk spread over its threads, every
thread whole columns of it, so that the reads are the rows' own coalesced ones and each thread folds
its registers down the chunk in order with no exchange. Then the chunks' sums, with the rows past
the last whole chunk after them, are turned so that each column is a row (a copy: nothing rounds)
and summed along those rows by ``tp.sum`` (32768 rows of 4096 in chunks of 12: 2730 chunk sums and 8
rows, then 4096 sums of 2738). A level per fan-in of 12 took eight or so calls, whose host time
bound a norm's backward (LayerNorm 8192x4096 on an H200: 1.18 ms a step, 0.26 of it kernels). The
order depends on the shapes only: the same bits on the CPU and every GPU (rows of n no CTA divides
so: a thread folds chunks of short ones, the planner's scope long ones). Summing along a row is
``tp.sum``'s row reduction."""
from __future__ import annotations

import math

from .._calls.scope import cta, thread
from .._ops import names as tp
from .._program.program import program

__all__ = ["sum_to"]

# values a thread folds per chunk, all loaded at once: 48 at cta(1024) compile to 57 registers of the 64 a
# thread may hold there, with no local memory (sm_90a: 12 LDG.64 + 44 FADD + 1 STG.128 for bfloat16 rows
# of 4096); more spill
_HELD = 48


def _wide(x) -> str:
    return "float64" if x.dtype == "float64" else "float32"


@program
def _column_sums(rows):
    """A chunk of rows (R, N) folded down its columns, in order, in the wide dtype."""
    return tp.sum(tp.cast(rows, _wide(rows)), axes=0)


@program
def _row_sums(row):
    return tp.sum(tp.cast(row, _wide(row)), axes=-1)


def _chunking(n: int):
    """(scope, rows per chunk) for rows of n. A CTA whose threads each hold runs of 4 elements of
    every row (the planner's placement of a row over a CTA), the most threads that divides the row
    so, where a thread's share of a row is small; else for short rows a thread holding the chunk;
    else the planner's scope (its own order, still the same on both backends)."""
    for threads in range(1024, 31, -32):
        if n % (threads * 4) == 0 and n // threads <= _HELD // 2:
            return cta(threads), _HELD // (n // threads)
    if n <= 512:
        return thread, max(2, min(16, 256 // n))
    return None, 8


def _sum_columns(x, backend, target):
    """x (A, B, N) summed over B: (A, N), in the wide dtype: the whole chunks of B folded, then the
    chunks' sums and the rows past them (in order) summed along B as rows."""
    import torch
    scope, rows = _chunking(x.shape[-1])
    a, b, n = x.shape
    chunks = b // rows
    if chunks >= 2:  # one chunk: its rows summed as a row directly
        sums = _column_sums(x[:, :chunks * rows].reshape(a, chunks, rows, n), batch_dims=2, scope=scope,
                            backend=backend, target=target)
        x = torch.cat([sums, x[:, chunks * rows:].to(sums.dtype)], 1)
    return _row_sums(x.transpose(1, 2).contiguous(), batch_dims=2, backend=backend, target=target)


def sum_to(g, shape, backend=None, target=None):
    """``g.sum_to_size(shape)`` with tileprim's sums, on g's device: the dims ``shape`` lacks or
    holds as 1 summed over, in the wide dtype, then rounded once to g's dtype."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    if backend is None and g.device.type == "cpu":
        backend = "cpu"
    target_dims = (1,) * (g.dim() - len(shape)) + shape
    groups = []  # runs of [reduced, size] over g's dims, dims of 1 left out
    for size, want in zip(g.shape, target_dims):
        if size == 1:
            continue
        reduced = want == 1
        if groups and groups[-1][0] == reduced:
            groups[-1][1] *= size
        else:
            groups.append([reduced, size])
    x = g.contiguous()
    while any(r for r, _ in groups):
        last = max(i for i, (r, _) in enumerate(groups) if r)
        before = math.prod(s for _, s in groups[:last])
        after = math.prod(s for _, s in groups[last + 1:])
        if after == 1:  # summed along rows
            x = _row_sums(x.reshape(before, groups[last][1]), batch_dims=1, backend=backend, target=target)
        else:  # summed down columns
            x = _sum_columns(x.reshape(before, groups[last][1], after), backend, target)
        del groups[last]
    return x.reshape(shape).to(g.dtype)
