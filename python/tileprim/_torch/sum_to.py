"""A broadcast operand's gradient summed back to its shape with tileprim's own reductions (torch's
``sum_to_size`` sums in one order on its CPU and another on CUDA, so a norm's weight gradient would
not be the same bits on both, DESIGN §3). In float32 for 16-bit gradients (float64 for float64),
rounded once to the gradient's dtype at the end.

Summing down a batch of rows (a norm's weight over 8192-32768 rows) takes two program calls, more
where the chunks' sums are many. First whole chunks of rows are folded: each instance a CTA holding
a chunk spread over its threads, every thread whole columns of it, so that the reads are the rows'
own coalesced ones and each thread folds its registers down the chunk in order with no exchange.
Where the chunks' sums, with the rows past the last whole chunk after them, are more than
``_TURNED`` a column group (wide rows, whose chunks are short, or many rows), they are folded in
chunks so again. Then they are turned so that each column is a row (a copy: nothing rounds) and
summed along those rows by ``tp.sum``, rounded to the gradient's dtype as they are written. A
chunk's rows divide the batch where they can (8192 rows of 4096: chunks of 8, the most up to 12
that divide it: 1024 chunk sums, then 4096 sums of 1024), so that no rows are left to copy beside
the sums. Folding level by level all the way (a fan-in of 12 each) took eight or so calls, whose
host time bound a norm's backward (LayerNorm 8192x4096 on an H200: 1.18 ms a step, 0.26 of it
kernels); hence the turn once the sums are few. The order depends on the shapes only: the same bits
on the CPU and every GPU (rows of n no CTA divides so: a thread folds chunks of short ones, the
planner's scope long ones). Summing along a row is ``tp.sum``'s row reduction."""
from __future__ import annotations

import functools
import math

from .._calls.scope import cta, thread
from .._ops import names as tp
from .._program.program import program
from .func import unroutable

__all__ = ["sum_to", "sums_to", "folded_run", "sums_from_folds", "define_op"]

# chunk sums turned at most this many per column group (then summed along rows); past it their chunks
# are folded again first. torch copies a transposed array at about 1 TB/s (an H200: LayerNorm's
# 1024 x 4096 float32 chunk sums in 0.031 ms), a fold reads at the bandwidth, so past 16 MB of
# float32 one more fold and turning a fourth of it costs less than turning it all (rows of 16384
# fold four at a time: 32768 of them leave 8192 x 16384 chunk sums, a 512 MB turn)
_TURNED = 1 << 22

# values a thread folds per chunk, all loaded at once: 48 at cta(1024) compile to 57 registers of the 64 a
# thread may hold there, with no local memory (sm_90a: 12 LDG.64 + 44 FADD + 1 STG.128 for bfloat16 rows
# of 4096); more spill
_HELD = 48
# ...but 4 rows a chunk where that holds at most 64 (the planner's `spilled` placement): rows of 16384
# (16 values a thread at cta(1024)) folded 2 at a time took a level per halving (32768 rows on an H200:
# 0.753 ms, then 0.369, 0.185, ...); 4 at a time take 0.671 ms and leave half the sums. 8 (128 values)
# took 1.337 ms
_LEAST_FAN_IN, _SPILLED = 4, 64


def _wide(x) -> str:
    return "float64" if x.dtype == "float64" else "float32"


def _folded(rows):
    """A chunk of rows (R, N) folded down its columns, in order, in the wide dtype."""
    return tp.sum(tp.cast(rows, _wide(rows)), axes=0)


def _summed(row, dtype):
    """Rows summed along their last dim in the wide dtype, rounded once to ``dtype`` (None: left wide)."""
    total = tp.sum(tp.cast(row, _wide(row)), axes=-1)
    return total if dtype is None else tp.cast(total, dtype)


@program
def _column_sums(rows):
    return _folded(rows)


@program
def _column_sums_of_two(a, b):  # a norm's weight and bias gradients in one kernel
    return _folded(a), _folded(b)


@functools.lru_cache(maxsize=None)
def _row_sums(dtype=None):
    """The program summing rows along their last dim (``_summed``), so that a gradient's last step
    is no separate cast."""
    @program
    def row_sums(row):
        return _summed(row, dtype)
    return row_sums


@functools.lru_cache(maxsize=None)
def _row_sums_of_two(dtype=None):
    @program
    def row_sums_of_two(a, b):
        return _summed(a, dtype), _summed(b, dtype)
    return row_sums_of_two


def _each(one, two, xs: list, batch_dims, scope=None, backend=None, target=None) -> list:
    """``one`` over each of xs, or ``two`` over pairs of them (one kernel for two gradients); past the
    routes where none can take them (in autograd's backward)."""
    unrouted = unroutable(xs)

    def call(prog, *tiles):
        if unrouted:
            return prog._unrouted(tiles, batch_dims, scope, backend, target, None)
        return prog(*tiles, batch_dims=batch_dims, scope=scope, backend=backend, target=target)

    out = []
    for k in range(0, len(xs) - 1, 2):
        out += call(two, xs[k], xs[k + 1])
    return out + ([call(one, xs[-1])] if len(xs) % 2 else [])


@functools.lru_cache(maxsize=None)
def _chunking(b: int, n: int):
    """(scope, rows per chunk) for b rows of n. A CTA whose threads each hold runs of 4 elements of
    every row (the planner's placement of a row over a CTA), the most threads that divides the row
    so, where a thread's share of a row is small; else for short rows a thread holding the chunk;
    else the planner's scope (its own order, still the same on both backends)."""
    for threads in range(1024, 31, -32):
        if n % (threads * 4) == 0 and n // threads <= _HELD // 2:
            per = n // threads
            return cta(threads), _dividing(b, max(_HELD // per, min(_LEAST_FAN_IN, _SPILLED // per)))
    if n <= 512:
        return thread, _dividing(b, max(2, min(16, 256 // n)))
    return None, _dividing(b, 8)


def _dividing(b: int, most: int) -> int:
    """Rows per chunk: the most, up to ``most``, that divide the b rows where there are at least half
    as many (no rows left past the last chunk to copy beside the chunks' sums), else ``most``."""
    for rows in range(most, max(2, (most + 1) // 2) - 1, -1):
        if b % rows == 0:
            return rows
    return most


def folded_run(b: int, n: int):
    """The rows of the first fold of b rows of n (``sums_to``'s first level: chunks of consecutive rows,
    each folded in order from -0.0 in the wide float), where a kernel that makes the rows may fold them
    so itself (``Program._run``'s ``folded``) with the same bits: whole chunks only, at a scope whose
    threads fold whole columns; else None."""
    scope, rows = _chunking(b, n)
    if scope is None or b // rows < 2 or b % rows:
        return None
    return rows


def sums_from_folds(sums: list, shape, dtype: str, backend=None, target=None) -> list:
    """The rest of ``sums_to`` of gradients of ``dtype`` to ``shape`` (n,), from their first fold's chunk
    sums (C, n) in the wide float: the same bits as ``sums_to`` of the rows."""
    return [x.reshape(shape) for x in _sum_columns([s.reshape(1, *s.shape) for s in sums], dtype, backend, target,
                                                   folded=True)]


def _sum_columns(xs: list, dtype, backend, target, folded: bool = False) -> list:
    """Each x (A, B, N) of xs (one shape and dtype) summed over B: (A, N), rounded once to ``dtype``
    (None: the wide dtype): the whole chunks of B folded, then the chunks' sums and the rows past
    them (in order) folded so again while more than _TURNED a column group, then summed along B
    as rows. ``folded``: xs are already a first fold's chunk sums."""
    import torch
    a, b, n = map(int, xs[0].shape)  # ints, as sums_to's (a traced size specialised)
    while not (folded and b * n <= _TURNED):
        scope, rows = _chunking(b, n)
        chunks = b // rows
        if chunks < 2:  # one chunk: its rows summed as a row directly
            break
        covered = chunks * rows  # the rows of whole chunks; those past them join the chunks' sums
        whole = xs if covered == b else [x[:, :covered] for x in xs]
        sums = _each(_column_sums, _column_sums_of_two, [x.reshape(a, chunks, rows, n) for x in whole],
                     batch_dims=2, scope=scope, backend=backend, target=target)
        xs = sums if covered == b else [torch.cat([s, x[:, covered:].to(s.dtype)], 1) for s, x in zip(sums, xs)]
        b = int(xs[0].shape[1])
        folded = True
    return _each(_row_sums(dtype), _row_sums_of_two(dtype), [x.transpose(1, 2).contiguous() for x in xs],
                 batch_dims=2, backend=backend, target=target)


def sum_to(g, shape, backend=None, target=None):
    """``g.sum_to_size(shape)`` with tileprim's sums, on g's device: the dims ``shape`` lacks or
    holds as 1 summed over, in the wide dtype, then rounded once to g's dtype. In code Dynamo traces
    (a torch.autograd.Function's forward under torch.compile), one custom op, ``tileprim::sum_to``:
    its calls are planned from the sizes in Python, which Dynamo would have to trace."""
    import torch
    if torch.compiler.is_dynamo_compiling():
        return torch.ops.tileprim.sum_to(g, list(shape), backend, target)
    return sums_to([g], shape, backend, target)[0]


def define_op(define) -> None:
    """Registers ``tileprim::sum_to`` through the custom ops' ``define`` (no backward: it runs where
    autograd does not look, a Function's forward)."""
    define("sum_to", "(Tensor g, SymInt[] shape, str? backend, str? target) -> Tensor",
           lambda g, shape, backend, target: sums_to([g], shape, backend, target)[0],
           lambda g, shape, backend, target: g.new_empty(shape))


def sums_to(gs: list, shape, backend=None, target=None) -> list:
    """sum_to of each of gs (one shape and dtype, such as a norm's weight and bias gradients), two at
    a time in each kernel."""
    g = gs[0]
    if tuple(g.shape) == tuple(shape):  # nothing to sum: a traced (symbolic) size stays so
        return list(gs)
    # sizes as ints: the order of the sums is a function of them, so a traced size is specialised
    # (a compiled backward summing over a dynamic batch is made per batch size)
    shape, sizes = tuple(map(int, shape)), tuple(map(int, g.shape))
    if 0 in sizes:  # nothing to sum: zeros (the sum's identity), as torch's sum_to_size gives
        return [x.new_zeros(shape) for x in gs]
    if backend is None and g.device.type == "cpu":
        backend = "cpu"
    target_dims = (1,) * (g.dim() - len(shape)) + shape
    groups = []  # runs of [reduced, size] over g's dims, dims of 1 left out
    for size, want in zip(sizes, target_dims):
        if size == 1:
            continue
        reduced = want == 1
        if groups and groups[-1][0] == reduced:
            groups[-1][1] *= size
        else:
            groups.append([reduced, size])
    xs = [x.contiguous() for x in gs]
    dtype = str(g.dtype).replace("torch.", "")
    while any(r for r, _ in groups):
        last = max(i for i, (r, _) in enumerate(groups) if r)
        before = math.prod(s for _, s in groups[:last])
        after = math.prod(s for _, s in groups[last + 1:])
        rounded = dtype if sum(r for r, _ in groups) == 1 else None  # the last sum: rounded as it is written
        if after == 1:  # summed along rows
            xs = _each(_row_sums(rounded), _row_sums_of_two(rounded), [x.reshape(before, groups[last][1]) for x in xs],
                       batch_dims=1, backend=backend, target=target)
        else:  # summed down columns
            xs = _sum_columns([x.reshape(before, groups[last][1], after) for x in xs], rounded, backend, target)
        del groups[last]
    # no sum (every dim summed is 1): g's values as they are
    return [x.reshape(shape) if x.dtype == g.dtype else x.reshape(shape).to(g.dtype) for x in xs]
