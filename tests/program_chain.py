"""Replays a ProgramPlan as a chain of separate steps over the whole batch, each result handed on
through NumPy: a copy (inserted or not) and each map NumPy computes exactly in the operands' dtype
(add, sub, mul, fdiv, sqrt, cast: one IEEE rounding, as tileprim's) by NumPy, so that on the CPU
the chain does not only replay the program's own step runner; every other step (reductions, whose
bits depend on the variant's order, and tileprim's own transcendentals) as the standalone call with
the storage, layouts and variant the program's step has. The program must give these bits
exactly."""
from __future__ import annotations

import numpy as np

import tileprim as tp
from tileprim._layout.value import TileLayout


# Maps whose every result NumPy rounds once in the operands' dtype (16-bit ones through float32,
# where one rounding is exact), as tileprim does.
_EXACT_MAPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "fdiv": np.divide, "sqrt": np.sqrt}


def _layout(ref):
    return None if ref.layout is None else TileLayout._wrap(ref.layout)


def run_chain(prog, args, batch_dims, scope, backend="cpu"):
    plan = tp.plan(prog, *args, batch_dims=batch_dims, scope=scope, backend="cpu")
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    values = {}
    batch = plan.out_shapes[0][:batch_dims]
    for i, t in enumerate(plan.tiles):
        if t["input"] >= 0:  # a tile shared by the batch: each standalone call reads it broadcast
            values[i] = np.ascontiguousarray(np.broadcast_to(arrays[t["input"]], tuple(batch) + tuple(t["shape"])))
    for step, info in zip(plan.steps, plan._core.steps):
        call = step._core.call
        ins = call.inputs
        operands = []
        for k, vid in enumerate(info["operands"]):
            if vid < 0:
                operands.append(step.scalars[k])
            else:
                operands.append(values[vid])
        result = plan.tiles[info["result"]]
        shape = tuple(batch) + tuple(result["shape"])
        if step.op == "copy":  # moves values unchanged: the source broadcast to the result's shape
            src = operands[0].reshape(tuple(batch) + tuple(plan.tiles[info["operands"][0]]["shape"]))
            values[info["result"]] = np.ascontiguousarray(np.broadcast_to(src, shape))
            continue
        if backend == "cpu" and (step.op in _EXACT_MAPS or step.op == "cast"):
            dtype = np.dtype(result["dtype"]) if step.op == "cast" else values[info["operands"][0]].dtype
            with np.errstate(all="ignore"):
                out = operands[0].astype(dtype) if step.op == "cast" else \
                    _EXACT_MAPS[step.op](*[np.asarray(o, dtype) for o in operands])
            values[info["result"]] = np.ascontiguousarray(np.broadcast_to(out, shape), dtype)
            continue
        first = next(r for r in ins if not r.is_scalar)
        kw = dict(scope=scope, storage=first.storage, layout=_layout(first), batch_dims=batch_dims, backend=backend,
                  dispatch=step.variant)
        fn = getattr(tp, step.op)
        if step.op in ("sum", "max", "min"):
            kw["out_layout"] = _layout(call.output)
            out = fn(operands[0], axes=tuple(call.axes), keepdims=True, **kw)
        elif step.op == "cast":
            out = fn(operands[0], result["dtype"], **kw)
        else:
            out = fn(*operands, **kw)
        values[info["result"]] = _host(out).reshape(shape)
    outs = tuple(values[i].reshape(shape) for i, shape in zip(plan._core.outputs, plan.out_shapes))
    return outs, plan


def _host(x):
    return x.get() if hasattr(x, "get") else np.asarray(x)
