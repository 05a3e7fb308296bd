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

__all__ = ["JaxCallback"]

_WORKER = []  # one thread, started from a tracing thread


def _worker() -> ThreadPoolExecutor:
    """XLA runs callbacks on its CPU threads, which flush subnormals (FTZ/DAZ); a thread started
    here, where jit traces, keeps the default floating-point mode, so the call gives eager bits."""
    if not _WORKER:
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tileprim-jax")
        pool.submit(int).result()  # the thread starts now, from this thread
        _WORKER.append(pool)
    return _WORKER[0]


class JaxCallback:
    """A traced call: ``run`` stages a host callback that calls the op eagerly on NumPy arrays."""

    def __init__(self, op: str, axes, accum, options: dict):
        self.op, self.axes, self.accum, self.options = op, axes, accum, options

    @property
    def plan(self):
        raise TypeError(f"{self.op}: tp.plan needs concrete arrays, not JAX tracers; call it outside jax.jit")

    def run(self, values, out):
        import jax
        if out is not None or self.accum:
            raise TypeError(f"{self.op}: out= and accum= write into an array in place; inside jax.jit JAX arrays "
                            f"are immutable, so use the returned array")
        o = self.options
        kw = {k: o[k] for k in ("scope", "storage", "layout", "out_layout", "batch_dims", "target", "dispatch")}
        kw.update(o["config"], backend=o["backend"] or "cpu")
        extra = () if o["extra"] is None else (o["extra"],)
        if self.axes is not None:
            kw["axes"] = self.axes
        fn = OPS[self.op]
        arrays = [i for i, x in enumerate(values) if not isinstance(x, (int, float))]
        scalars = list(values)

        def call(*xs):
            operands = list(scalars)
            for i, x in zip(arrays, xs):
                operands[i] = np.asarray(x)
            return np.asarray(fn(*operands, *extra, **kw))
        worker = _worker()

        def host(*xs):
            return worker.submit(call, *xs).result()

        # the result's shape and dtype: the same call on zeros of the operands' shapes and dtypes
        example = call(*(np.zeros(values[i].shape, values[i].dtype) for i in arrays))
        result = jax.ShapeDtypeStruct(example.shape, example.dtype)
        return jax.pure_callback(host, result, *(values[i] for i in arrays), vmap_method="sequential")
