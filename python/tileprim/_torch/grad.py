"""Backward passes of tileprim's custom ops, each written with tileprim ops on the forward call's
target and backend. A reduction in a backward (max/min's tie count) runs as the forward did (its
scope, storage, layouts, batch_dims); the maps run at thread scope, a row per thread, or where no
operand broadcasts, 8 elements per thread: an elementwise op gives the same bits however its
tiles are cut, and a map at a wider scope would need a layout the forward's does not give.

The rules themselves are ``_opspec.derivatives``' (shared with the tile programs' backward); the tie
masks of max/min come from ``tp.eq``. Broadcast operands get the gradient summed back to their
shape by tileprim's own sums (``sum_to``: the same bits on the CPU and the GPU)."""
from __future__ import annotations

from .._opspec.derivatives import NARY, UNARY, VALUELESS

from .._calls.scope import thread
from .._opspec.table import OPS
from .options import options_of
from .reduced import kept_shape
from .sum_to import sum_to

__all__ = ["backward_of"]


class _Ops:
    """tileprim's op functions with the backward's options bound. One backward's identical map
    calls run once (the tie masks both operands of a maximum share, say)."""

    def __init__(self, options_name: str):
        o = options_of(options_name)
        self._ops, self.options = OPS, o
        self._made = {}  # (op, operands by identity or value, options) -> (result, the operands kept alive)
        self._reduce = {k: o[k] for k in ("scope", "storage", "layout", "out_layout", "batch_dims", "target",
                                          "backend")}
        self._map = {"scope": thread, "target": o["target"], "backend": o["backend"]}

    def __getattr__(self, name):
        fn = self._ops[name]
        if name in ("sum", "max", "min"):
            return lambda *args, **more: fn(*args, **{**self._reduce, **more})
        return lambda *args, **more: self._run_map(name, fn, args, more)

    def _run_map(self, name, fn, args, more):
        import torch
        # tensors by identity (kept alive beside the result), scalars by repr (-0.0 is not 0.0)
        key = (name, tuple(id(a) if isinstance(a, torch.Tensor) else repr(a) for a in args),
               repr(sorted(more.items())))
        if key not in self._made:
            self._made[key] = (self._map_once(fn, args, more), args)
        return self._made[key][0]

    def _map_once(self, fn, args, more):
        import torch
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        shape = torch.broadcast_shapes(*(t.shape for t in tensors))
        if all(t.shape == shape for t in tensors):  # tiles of 8 (or 1) elements, whatever the shape
            # by the last dim (the row), not the count: a traced batch size stays symbolic
            per_thread = 8 if len(shape) and shape[-1] % 8 == 0 else 1
            flat = [a.reshape(-1, per_thread) if isinstance(a, torch.Tensor) else a for a in args]
            return fn(*flat, batch_dims=1, **self._map, **more).reshape(shape)
        return fn(*args, batch_dims=len(shape) - 1, **self._map, **more)  # a row per thread


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


# ---- registration --------------------------------------------------------------------------------
def backward_of(spec: dict):
    """(backward, setup_context) of an op, as torch.library.register_autograd takes them."""
    return _rules(spec)[:2]


def tangent_of(spec: dict):
    """The op's Jacobian-vector product, ``jvp(ctx, *tangents)`` of torch.func's forward mode, from the
    context ``backward_of``'s setup_context fills: each rule of the backward applied to a tangent
    (the maps are elementwise: their vector-Jacobian and Jacobian-vector products are one rule)."""
    return _rules(spec)[2]


def _rules(spec: dict):
    name = spec["name"]
    if spec["family"] == "reduction":
        return _reduction(name)
    if len(spec["operands"]) > 1 and name != "fill":
        return _nary(name, len(spec["operands"]))
    return _unary(name)


def _save(ctx, *tensors) -> None:
    ctx.save_for_backward(*tensors)
    ctx.save_for_forward(*tensors)  # jvp reads the same


def _unary(name):
    def derivative(tp, g, x, y):
        if name in VALUELESS:
            return tp.zero(g)
        return UNARY[name](tp, g, x, y, _dtype_name(x.dtype))

    def setup(ctx, inputs, output):
        ctx.options = inputs[-1]
        _save(ctx, inputs[0], output)

    def backward(ctx, g):
        x, y = ctx.saved_tensors
        grad = derivative(_Ops(ctx.options), g, x, y) if ctx.needs_input_grad[0] else None
        return (grad,) + (None,) * (2 if name == "fill" else 1)

    def jvp(ctx, t, *unused):
        x, y = ctx.saved_tensors
        if name == "cast":  # the tangent takes the result's dtype (the backward's takes the operand's)
            return _Ops(ctx.options).cast(t, _dtype_name(y.dtype))
        return derivative(_Ops(ctx.options), t, x, y)
    return backward, setup, jvp


def _nary(name, arity):
    def setup(ctx, inputs, output):
        ctx.options, ctx.scalars = inputs[-1], list(inputs[arity])
        ctx.is_tensor = [t is not None for t in inputs[:arity]]
        _save(ctx, *(t for t in inputs[:arity] if t is not None), output)

    def backward(ctx, g):
        saved = iter(ctx.saved_tensors[:-1])
        scalars = iter(ctx.scalars)
        values = [next(saved) if t else next(scalars) for t in ctx.is_tensor]
        tp, y = _Ops(ctx.options), ctx.saved_tensors[-1]
        out = [None] * arity
        for k, (v, t, needed) in enumerate(zip(values, ctx.is_tensor, ctx.needs_input_grad)):
            if t and needed:
                rule = None if name in VALUELESS else NARY[name][k]
                grad = tp.zero(g) if rule is None else rule(tp, g, values, y)
                out[k] = sum_to(grad, v.shape, tp.options["backend"], tp.options["target"])
        return (*out, None, None)

    def jvp(ctx, *tangents):
        saved = iter(ctx.saved_tensors[:-1])
        scalars = iter(ctx.scalars)
        values = [next(saved) if t else next(scalars) for t in ctx.is_tensor]
        tp, y = _Ops(ctx.options), ctx.saved_tensors[-1]
        rules = () if name in VALUELESS else NARY[name]
        terms = [rule(tp, t, values, y) for rule, t in zip(rules, tangents[:arity])
                 if rule is not None and t is not None]
        if not terms:
            return tp.zero(y)
        total = terms[0]
        for term in terms[1:]:
            total = tp.add(total, term)
        return total.expand(y.shape)  # a broadcast operand's tangent alone has its own shape
    return backward, setup, jvp


def _reduction(name):
    def setup(ctx, inputs, output):
        src, acc, axes, options = inputs
        ctx.axes, ctx.options, ctx.has_acc = list(axes), options, acc is not None
        _save(ctx, src, output, *(() if acc is None else (acc,)))

    def backward(ctx, g):
        src, result = ctx.saved_tensors[:2]
        tp = _Ops(ctx.options)
        # the reduced dims kept as 1 (tiles of the same rank): these broadcast over src
        kept = kept_shape(tuple(src.shape), ctx.axes, tp.options["batch_dims"])
        g = g.reshape(kept)
        acc = ctx.saved_tensors[2] if ctx.has_acc else None
        if name == "sum":
            g_src, g_acc = g.expand(src.shape), None if acc is None else g.reshape(acc.shape)
        else:
            result = result.reshape(kept)
            mask = tp.eq(src, result)
            count = tp.sum(mask, axes=tuple(ctx.axes)).reshape(kept)
            if acc is not None:
                acc_mask = tp.eq(acc.reshape(kept), result)
                count = tp.add(count, acc_mask)
            share = tp.fdiv(g, tp.maximum(count, 1.0))
            g_src = tp.mul(mask, share)
            g_acc = None if acc is None else tp.mul(acc_mask, share).reshape(acc.shape)
        return g_src if ctx.needs_input_grad[0] else None, g_acc, None, None

    def jvp(ctx, t_src, t_acc, *unused):
        src, result = ctx.saved_tensors[:2]
        acc = ctx.saved_tensors[2] if ctx.has_acc else None
        tp, axes = _Ops(ctx.options), tuple(ctx.axes)
        t_src = tp.zero(src) if t_src is None else t_src
        t_acc = None if acc is None else tp.zero(acc) if t_acc is None else t_acc
        if name == "sum":
            total = tp.sum(t_src, axes=axes)
            return total if acc is None else tp.add(total, t_acc.reshape(total.shape))
        # the tangents of the elements equal to the result, averaged (the backward's even split, transposed)
        mask = tp.eq(src, result.reshape(kept_shape(tuple(src.shape), axes, tp.options["batch_dims"])))
        count, total = tp.sum(mask, axes=axes), tp.sum(tp.mul(mask, t_src), axes=axes)
        if acc is not None:
            acc_mask = tp.eq(acc, result.reshape(acc.shape))
            count = tp.add(count, acc_mask.reshape(count.shape))
            total = tp.add(total, tp.mul(acc_mask, t_acc).reshape(total.shape))
        return tp.fdiv(total, tp.maximum(count, 1.0))
    return backward, setup, jvp
