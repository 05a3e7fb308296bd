"""Replays a ProgramPlan as a chain of standalone calls: each step (inserted copies included) is
called on its own, with the storage, layouts and variant the program's step has, on the whole
batch. The program must give these bits exactly."""
from __future__ import annotations

import numpy as np

import tileprim as tp
from tileprim._layout.value import TileLayout


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
        if step.op == "copy":  # moves values unchanged: the standalone copy of the broadcast source
            src = np.broadcast_to(operands[0].reshape(tuple(batch) + tuple(plan.tiles[info["operands"][0]]["shape"])),
                                  shape)
            if backend == "cuda":  # copy has no CUDA executor yet (issue 31); the values are the source's
                values[info["result"]] = np.ascontiguousarray(src)
            else:
                values[info["result"]] = tp.copy(np.ascontiguousarray(src), batch_dims=batch_dims, backend="cpu",
                                                 scope=tp.thread)
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
