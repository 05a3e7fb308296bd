"""Exec scopes: who runs one instance of a primitive on one tile.

Every op is a function with ``scope=...`` and a method of each scope object (found in
``_opspec.table.OPS``, which ``_ops.public`` fills)::

    tp.sum(A, axes=-1, scope=tp.cta(32), storage="shared")
    tp.cta(32).sum(A, axes=-1, storage="shared")        # the same call
"""
from __future__ import annotations

import functools
import operator
import sys

import tileprim._C as _C
from .._opspec.table import OPS

__all__ = ["ExecScope", "thread", "warp", "warpgroup", "wg", "cta", "STORAGE_SCOPES"]

STORAGE_SCOPES = tuple(_C.storage_names())  # C++'s storages, in its order
# (fewest, most) threads of each kind, as C++ has them: thread (1, 1), warp (32, 32), ...
_THREADS = _C.scope_threads()
_KINDS = tuple(_THREADS)
_MOST_CTA = _THREADS["cta"][1]


class ExecScope:
    """A thread, a warp (32 lanes), a warpgroup (128 threads) or a CTA of 1..1024 threads.

    Every op is also a method: ``tp.warp.sqrt(A, layout=L)`` is ``tp.sqrt(A, scope=tp.warp,
    layout=L)``.

    Examples
    --------
    >>> tp.warp.threads, tp.warp.default_storage, tp.cta(64).default_storage
    (32, 'local', 'shared')
    >>> x = np.arange(8, dtype=np.float32).reshape(2, 4)
    >>> tp.cta(32).sum(x, axes=-1)
    array([ 6., 22.], dtype=float32)
    """

    # One object per (kind, threads): equal scopes are the same object, so a call signature
    # holding a scope hashes and compares it in C, not through Python methods.
    _made: dict = {}

    def __new__(cls, kind: str, threads: int):
        try:
            scope = cls._made.get((kind, threads))
        except TypeError:  # unhashable
            scope = None
        if scope is None:
            _check_scope(kind, threads)
            scope = super().__new__(cls)
            scope.kind, scope.threads = kind, threads
            cls._made[(kind, threads)] = scope
        return scope

    def __reduce__(self):
        return (ExecScope, (self.kind, self.threads))

    @property
    def default_storage(self) -> str:
        """Where a tile is staged when ``storage=`` is not given: shared for a CTA, else registers."""
        return "shared" if self.kind == "cta" else "local"

    def __getattr__(self, name: str):
        if _compiling():  # torch.compile cannot set a partial's attributes (and its graph needs none)
            return functools.partial(self._op(name), scope=self)
        key = (self.kind, self.threads, name)
        bound = _BOUND.get(key)
        if bound is None or bound.func is not OPS.get(name):  # made once per scope and op (an op may be
            # registered again): wrapping costs more than a small call's dispatch
            fn = self._op(name)
            bound = functools.update_wrapper(functools.partial(fn, scope=self), fn)
            bound._tp_op = fn._tp_op
            _BOUND[key] = bound
        return bound

    def _op(self, name: str):
        fn = OPS.get(name)
        if fn is None:
            raise AttributeError(f"{self!r} has no op {name!r}; the ops are {', '.join(sorted(OPS))}")
        return fn

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(OPS))

    def __repr__(self) -> str:
        return f"tp.cta(threads={self.threads})" if self.kind == "cta" else f"tp.{self.kind}"


_BOUND: dict = {}  # (kind, threads, op name) -> the op bound to that scope

def _check_scope(kind, threads) -> None:
    """The rule of each kind (_THREADS): a thread is 1 thread, a warp 32, a warpgroup 128 (4 warps),
    a CTA 1..1024."""
    if kind not in _KINDS:
        raise ValueError(f"kind: {kind!r} is not a scope; expected 'thread', 'warp', 'warpgroup' or 'cta'")
    if isinstance(threads, bool) or type(threads) is not int:
        raise TypeError(f"threads: expected an int, not {threads!r}")
    fewest, most = _THREADS[kind]
    if kind == "cta":
        _check_cta(threads)
    elif threads != fewest:
        raise ValueError(f"threads: a {kind} is {fewest} thread{'s' if fewest > 1 else ''}, not {threads} "
                         f"(use tp.{kind}, or tp.cta(n) for another count)")


def _check_cta(threads: int) -> None:
    if not 1 <= threads <= _MOST_CTA:
        raise ValueError(f"threads: cta(threads={threads}) needs 1 <= threads <= {_MOST_CTA}")


def _compiling() -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and torch.compiler.is_compiling()


thread = ExecScope("thread", 1)
warp = ExecScope("warp", 32)
warpgroup = ExecScope("warpgroup", 128)
wg = warpgroup


def cta(threads: int = 128) -> ExecScope:
    """A CTA of ``threads`` threads (1..1024).

    Parameters
    ----------
    threads : int, default 128

    Returns
    -------
    ExecScope

    Raises
    ------
    TypeError, ValueError
        A non-integer count, or one outside 1..1024.

    Examples
    --------
    >>> tp.cta(32)
    tp.cta(threads=32)
    """
    if isinstance(threads, bool) or not hasattr(threads, "__index__"):
        raise TypeError(f"threads: expected an int, not {type(threads).__name__}")
    threads = operator.index(threads)
    _check_cta(threads)
    return ExecScope("cta", threads)


# Every CTA scope exists from the start (1024 small objects): a compiled function (torch.compile)
# that calls tp.cta(n) finds its scope instead of making one, which Dynamo would guard against.
for _threads in range(1, _MOST_CTA + 1):
    ExecScope("cta", _threads)
