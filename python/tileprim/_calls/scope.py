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

__all__ = ["ExecScope", "thread", "warp", "warpgroup", "wg", "cta", "cluster", "STORAGE_SCOPES", "not_a_scope",
           "check_storage", "TILE_STORAGES"]

STORAGE_SCOPES = tuple(_C.storage_names())  # C++'s storages, in its order
# where a tile op stages its tiles ('global', the last, is where the caller's arrays lie)
TILE_STORAGES = STORAGE_SCOPES[:-1]
# (fewest, most) threads of each kind, as C++ has them: thread (1, 1), warp (32, 32), ...
_THREADS = _C.scope_threads()
_KINDS = tuple(_THREADS)
_MOST_CTA = _THREADS["cta"][1]
_CLUSTER_CTAS = (2, 4, 8, 16)  # 8 is the portable most; 16 where the target allows it


class _ScopeMethod(functools.partial):
    """An op at a scope (``tp.warp.sum``): the op with the scope given, shown as what it is."""

    def __repr__(self) -> str:
        return f"<tp op {self.func.__name__} at {self.keywords['_method_scope']!r}>"


class ExecScope:
    """A thread, a warp (32 lanes), a warpgroup (128 threads), a CTA of 1..1024 threads, or a
    cluster of 2..16 CTAs acting as one instance (``threads`` is then all its lanes, ``ctas`` its
    CTAs, ``cta_threads`` each CTA's threads).

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

    def __new__(cls, kind: str, threads: int, ctas: int = 1):
        try:
            scope = cls._made.get((kind, threads, ctas))
        except TypeError:  # unhashable
            scope = None
        if scope is None:
            _check_scope(kind, threads, ctas)
            scope = super().__new__(cls)
            scope.kind, scope.threads, scope.ctas = kind, threads, ctas
            # its repr kept as a string: what torch's custom ops take (torch.compile may trace an int
            # read off an object as a symbol, a string it keeps as it is); scope_of_key's inverse
            scope.key = repr(scope)
            cls._made[(kind, threads, ctas)] = cls._made[scope.key] = scope
        return scope

    def __reduce__(self):
        return (ExecScope, self.parts)

    @property
    def parts(self) -> tuple:
        """(kind, threads, ctas): what C++ and the torch ops' option tables are given."""
        return (self.kind, self.threads, self.ctas)

    @property
    def cta_threads(self) -> int:
        """The threads of one CTA of the instance (a cluster's share; else ``threads``)."""
        return self.threads // self.ctas

    @property
    def default_storage(self) -> str:
        """Where a tile is staged when ``storage=`` is not given: shared for a CTA, else registers
        (a cluster's tiles too: each of its CTAs has its own shared memory)."""
        return "shared" if self.kind == "cta" else "local"

    def __getattr__(self, name: str):
        if _compiling():  # torch.compile cannot set a partial's attributes (and its graph needs none)
            return functools.partial(self._op(name), _method_scope=self)
        key = (self.parts, name)
        bound = _BOUND.get(key)
        if bound is None or bound.func is not OPS.get(name):  # made once per scope and op (an op may be
            # registered again): wrapping costs more than a small call's dispatch
            fn = self._op(name)
            bound = functools.update_wrapper(_ScopeMethod(fn, _method_scope=self), fn)
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
        if self.kind == "cluster":
            return f"tp.cluster({self.ctas}, threads={self.cta_threads})"
        return f"tp.cta(threads={self.threads})" if self.kind == "cta" else f"tp.{self.kind}"


def scope_of_key(key: str) -> "ExecScope":
    """The scope whose ``key`` this is (made in this process)."""
    return ExecScope._made[key]


_BOUND: dict = {}  # ((kind, threads, ctas), op name) -> the op bound to that scope


def not_a_scope(scope, where: str = "scope") -> TypeError:
    """The error for a scope= that is no scope object (every call and program says it alike)."""
    return TypeError(f"{where}: expected tp.thread, tp.warp, tp.warpgroup, tp.cta(n) or tp.cluster(n), not {scope!r}")


def check_storage(storage, where: str = "storage") -> None:
    """A storage= a call or a step names: None (the planner's) or a name. '' is refused here (a step
    took it for none); C++ refuses unknown names, suggesting the one meant ('smem' -> 'shared'), and
    its dispatch refuses 'global' (where arrays lie) with every variant's reason."""
    if storage is None:
        return
    if not isinstance(storage, str):
        raise TypeError(f"{where}: expected one of {', '.join(map(repr, TILE_STORAGES))}, not {storage!r}")
    if not storage:
        raise ValueError(f"{where}: '' names no storage; use 'local' (registers), 'shared' or 'shared.dyn' "
                         "(shared memory), or None for the planner's")


def _check_scope(kind, threads, ctas=1) -> None:
    """The rule of each kind (_THREADS): a thread is 1 thread, a warp 32, a warpgroup 128 (4 warps),
    a CTA 1..1024, a cluster 2, 4, 8 or 16 CTAs of whole warps (threads: all its lanes)."""
    if kind not in _KINDS:
        raise ValueError(f"kind: {kind!r} is not a scope; expected 'thread', 'warp', 'warpgroup', 'cta' or 'cluster'")
    if isinstance(threads, bool) or type(threads) is not int:
        raise TypeError(f"threads: expected an int, not {threads!r}")
    if isinstance(ctas, bool) or type(ctas) is not int:
        raise TypeError(f"ctas: expected an int, not {ctas!r}")
    if kind == "cluster":
        _check_cluster(ctas, threads // ctas if ctas in _CLUSTER_CTAS else threads)
        if threads % ctas:
            raise ValueError(f"threads: a cluster of {ctas} CTAs cannot have {threads} lanes (ctas * threads per CTA)")
        return
    if ctas != 1:
        raise ValueError(f"ctas: a {kind} is one CTA or less, not {ctas} CTAs (use tp.cluster(ctas))")
    fewest, most = _THREADS[kind]
    if kind == "cta":
        _check_cta(threads)
    elif threads != fewest:
        raise ValueError(f"threads: a {kind} is {fewest} thread{'s' if fewest > 1 else ''}, not {threads} "
                         f"(use tp.{kind}, or tp.cta(n) for another count)")


def _check_cta(threads: int) -> None:
    if not 1 <= threads <= _MOST_CTA:
        raise ValueError(f"threads: cta(threads={threads}) needs 1 <= threads <= {_MOST_CTA}")


def _check_cluster(ctas: int, threads: int) -> None:
    if ctas not in _CLUSTER_CTAS:
        raise ValueError(f"ctas: cluster(ctas={ctas}) needs 2, 4, 8 or 16 CTAs (16 only where the target allows it)")
    if not (32 <= threads <= _MOST_CTA and threads % 32 == 0):
        raise ValueError(f"threads: cluster(threads={threads}) needs whole warps per CTA: a multiple of 32 from 32 "
                         f"to {_MOST_CTA}")


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


def cluster(ctas: int, threads: int = 256) -> ExecScope:
    """A thread-block cluster of ``ctas`` CTAs of ``threads`` threads each, run as ONE scope
    instance of ``ctas * threads`` lanes (lane = the CTA's rank in the cluster * threads + its
    thread index): a row too long for one CTA's registers is spread over the cluster's, and the
    lanes exchange partial results through the cluster's distributed shared memory (Hopper, sm_90
    and later; planned on the CPU backend as on the GPU, with the same bits). Every tile of a
    cluster lives in registers.

    Parameters
    ----------
    ctas : int
        2, 4 or 8 (16 where the target allows a non-portable cluster size).
    threads : int, default 256
        Threads of each CTA: whole warps, at most 1024.

    Returns
    -------
    ExecScope

    Raises
    ------
    TypeError, ValueError
        A non-integer count, or one outside those rules. A plan for a target without clusters
        (before sm_90) refuses the scope.

    Examples
    --------
    >>> tp.cluster(4)
    tp.cluster(4, threads=256)
    >>> tp.cluster(4).threads, tp.cluster(4).ctas, tp.cluster(4).default_storage
    (1024, 4, 'local')
    """
    for name, value in (("ctas", ctas), ("threads", threads)):
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise TypeError(f"{name}: expected an int, not {type(value).__name__}")
    ctas, threads = operator.index(ctas), operator.index(threads)
    _check_cluster(ctas, threads)
    return ExecScope("cluster", ctas * threads, ctas)


# Every CTA scope exists from the start (1024 small objects): a compiled function (torch.compile)
# that calls tp.cta(n) finds its scope instead of making one, which Dynamo would guard against.
for _threads in range(1, _MOST_CTA + 1):
    ExecScope("cta", _threads)
