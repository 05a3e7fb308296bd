"""tileprim ops inside ``jax.jit`` (and other JAX transformations that trace): the op runs as a
``jax.pure_callback`` on the host, on NumPy copies of its operands, with the same options as an
eager call (so the same bits: tileprim gives one result on the CPU and every GPU).

A stepping stone, not ``jax.ffi``: a GPU array inside ``jit`` travels to the host and back, and
the call has no derivative (``jax.grad`` through it raises JAX's error for callbacks). Eager
calls on JAX GPU arrays stay on the GPU."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._opspec.table import OPS

__all__ = ["JaxCallback", "traced_program"]

_WORKER = []  # one thread, started from a tracing thread


def _worker() -> ThreadPoolExecutor:
    """XLA runs callbacks on its CPU threads, which flush subnormals (FTZ/DAZ); a thread started
    here, where jit traces, keeps the default floating-point mode, so the call gives eager bits."""
    if not _WORKER:
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tileprim-jax")
        pool.submit(int).result()  # the thread starts now, from this thread
        _WORKER.append(pool)
    return _WORKER[0]


def staged(what: str, eager, values: tuple):
    """``eager(*operands)`` (NumPy operands in, a NumPy array or a tuple of them out) as a
    ``jax.pure_callback`` on the JAX arrays and tracers among ``values`` (the rest, Python scalars,
    passed as they are), its result shapes from the same call on zeros of the operands'."""
    import jax
    arrays = [i for i, x in enumerate(values) if not isinstance(x, (int, float, np.integer, np.floating))]

    def call(*xs):
        operands = list(values)
        for i, x in zip(arrays, xs):
            operands[i] = np.asarray(x)
        result = eager(*operands)
        return tuple(map(np.asarray, result)) if type(result) is tuple else np.asarray(result)
    worker = _worker()

    def host(*xs):
        return worker.submit(call, *xs).result()

    example = call(*(np.zeros(values[i].shape, values[i].dtype) for i in arrays))
    shapes = (tuple(jax.ShapeDtypeStruct(r.shape, r.dtype) for r in example) if type(example) is tuple
              else jax.ShapeDtypeStruct(example.shape, example.dtype))
    return jax.pure_callback(host, shapes, *(values[i] for i in arrays), vmap_method="sequential")


def _refuse_out(what: str, out, accum=False) -> None:
    if out is not None or accum:
        raise TypeError(f"{what}: out= and accum= write into an array in place; inside jax.jit JAX arrays "
                        f"are immutable, so use the returned array")


class JaxCallback:
    """A traced call: ``run`` stages a host callback that calls the op eagerly on NumPy arrays."""

    def __init__(self, op: str, axes, accum, options: dict):
        self.op, self.axes, self.accum, self.options = op, axes, accum, options

    @property
    def plan(self):
        raise TypeError(f"{self.op}: tp.plan needs concrete arrays, not JAX tracers; call it outside jax.jit")

    def run(self, values, out):
        _refuse_out(self.op, out, self.accum)
        o = self.options
        kw = {k: o[k] for k in ("scope", "storage", "layout", "out_layout", "batch_dims", "target", "dispatch")}
        kw.update(o["config"], backend=o["backend"] or "cpu")
        extra = () if o["extra"] is None else (o["extra"],)
        if self.axes is not None:
            kw["axes"] = self.axes
        fn = OPS[self.op]
        return staged(self.op, lambda *operands: fn(*operands, *extra, **kw), tuple(values))


def traced_program(program, args, out, options: dict):
    """A tile program called on JAX tracers: its eager call (the CPU backend unless one is named)
    staged as a host callback, as an op's is."""
    _refuse_out(program.__name__, out)
    options = {**options, "backend": options["backend"] or "cpu"}
    # the arguments come bound in the function's order (keyword-only ones too): run as they are
    return staged(program.__name__, lambda *operands: program._run(operands, **options), tuple(args))
