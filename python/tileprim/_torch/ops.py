"""Every tileprim op as a ``torch.library`` custom op (``torch.ops.tileprim.<op>``), registered
once per op when torch loads (``library.register``), with a fake implementation (the result's shape,
dtype and device, nothing run) and a backward (``grad``).

Which calls take the custom op: those ``torch.compile`` traces (Dynamo inlines each op
function's twin, which calls the custom op), tensors that need autograd (an input with
``requires_grad`` under grad mode) and tensor subclasses (fake and functional tensors of
tracing). Every other call on torch tensors keeps the direct path: a custom op's own dispatch
costs more than a small call does.

The schema of each op is fixed; what is not a tensor or the axes travels as ``options``, the
name of an entry in the table of call options (``options``). A tile program registers
through ``define`` too: one custom op per program signature (a name made from its traced steps'
key), its options interned in that table, its backward optional (none: a gradient is refused, not
dropped)."""
from __future__ import annotations

import sys
from typing import Dict, Optional

from .._layout.value import TileLayout
from .._ops.functions import op_function
from .._opspec.table import OPS, SPECS
from .after_load import after_load
from .fake_backward import add_backward, describe, trace_backward
from .func import to_the_front, transformable, transforms_active
from .grad import backward_of, tangent_of
from .options import OPTION_NAMES, intern_options, options_name, options_of
from .reduced import kept_shape, reduced_shape
from . import sum_to

__all__ = ["routing", "Routed", "register", "define", "refuse_autograd", "TORCH_OPS"]

TORCH_OPS: Dict[str, object] = {}  # op name -> torch.ops.tileprim.<op>.default, once registered
FUNC_CALLS: Dict[str, object] = {}  # op name -> its call under a torch.func transform (func.py)
_LIBRARY = []  # the torch.library.Library that owns the registrations (kept alive)


def routing(values, out) -> Optional[bool]:
    """None when no torch tensor needs the custom op; True when one always does (a subclass: fake or
    functional tensors; a tensor a torch.func transform wraps); False when it does under grad mode
    (an input that requires grad)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    # one pass, asked on every call of a program: plain tensors by their exact type
    tensor, parameter = torch.Tensor, torch.nn.Parameter
    found = grad = False
    for x in values:
        kind = type(x)
        if kind is tensor or kind is parameter:
            found, grad = True, grad or x.requires_grad
        elif isinstance(x, tensor):
            register()
            return True
    if not found:
        return None
    register()
    outs = out if isinstance(out, tuple) else (out,)
    if transforms_active() and (any(map(_wrapped, values)) or any(map(_wrapped, outs))):
        return True  # under torch.func, grad mode on or off, out= alone wrapped too
    return False if grad else None


def _wrapped(x) -> bool:
    torch = sys.modules["torch"]
    return isinstance(x, torch.Tensor) and torch._C._functorch.is_functorch_wrapped_tensor(x)


def refuse_autograd(what: str, values) -> None:
    """TypeError where a torch tensor needs a gradient that ``what`` has no backward for."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.is_grad_enabled() and any(
            isinstance(x, torch.Tensor) and x.requires_grad for x in values):
        raise _no_backward(what)


def _no_backward(what: str) -> TypeError:
    return TypeError(f"{what}: has no backward, and an input requires grad (its gradient would be dropped); "
                     f"pass x.detach() or call it under torch.no_grad()")


class Routed:
    """A call taken by the custom op; ``prepare`` makes the direct path's prepared call, used for
    ``.plan`` and, where routed only for autograd, for runs with grad mode off."""

    def __init__(self, always: bool, op: str, axes, accum, options: dict, prepare, keepdims=False):
        self.always, self.op, self.axes, self.accum, self.options = always, op, axes, accum, options
        self.keepdims = keepdims
        self._prepare, self._prepared, self.name = prepare, None, None

    @property
    def plan(self):
        return self.prepared().plan

    def prepared(self):
        if self._prepared is None:
            self._prepared = self._prepare()
        return self._prepared

    def run(self, values, out):
        import torch
        if not self.always and not torch.is_grad_enabled():
            return self.prepared().run(values, out)
        if self.name is None:  # once per call signature (the custom op's options argument)
            self.name = options_name(self.options)
        return call(self.op, values, out, self.axes, self.accum, self.name, self.options["batch_dims"], self.keepdims)


def _torch_call(op, operands, axes, out, accum, scope, storage, layout, out_layout, batch_dims, target, backend,
                dispatch, extra, config, keepdims=False) -> Routed:
    """The compiled twin's ``prepared_call``: always the custom op."""
    options = dict(zip(OPTION_NAMES, (scope, storage, layout, out_layout, batch_dims, target, backend, dispatch,
                                      extra)), config=config)
    return Routed(True, op, axes, accum, options, None, keepdims)


def call(op: str, values, out, axes, accum: bool, name: str, batch_dims=0, keepdims=False):
    """Runs ``op`` through its custom op; ``out=`` is written from the result (so autograd sees it).
    A keepdims reduction runs the custom op without keepdims and reshapes its result, so the op's
    schema, fake and backward stay one."""
    import torch
    spec = SPECS[op]
    # a torch.func transform takes the op's call as a Function of its own (func.py), torch.compile the op
    fn = FUNC_CALLS[op] if transforms_active() and not torch.compiler.is_compiling() else TORCH_OPS[op]
    tensors = [x if isinstance(x, torch.Tensor) else None for x in values]
    if any(t is None and not isinstance(x, (int, float)) for t, x in zip(tensors, values)):
        raise TypeError(f"{op}: under autograd or torch.compile, operands are torch tensors or Python scalars "
                        f"(not {', '.join(type(x).__name__ for x in values)})")
    if spec["family"] == "reduction":
        if accum and out is None:
            raise ValueError("accum: accum=True folds the result into out=, so out= must be given")
        axes_list = list(axes) if isinstance(axes, (tuple, list)) else [axes]
        # acc: a copy, as out= is then written from the result (autograd keeps the old values)
        acc = out.clone() if accum else None
        if acc is not None and keepdims:
            acc = acc.reshape(reduced_shape(tuple(values[0].shape), axes_list, batch_dims))
        args = (values[0], acc, axes_list, name)
    elif op == "fill":
        args = (values[0], float(values[1]), name)
    elif len(spec["operands"]) == 1:
        args = (values[0], name)
    else:
        args = (*tensors, [float(x) for t, x in zip(tensors, values) if t is None], name)
    result = fn(*args)
    if spec["family"] == "reduction" and keepdims:
        result = result.reshape(kept_shape(tuple(values[0].shape), axes_list, batch_dims))
    if out is None:
        return result
    if not isinstance(out, torch.Tensor) or out.dtype != result.dtype or out.device != result.device:
        raise TypeError(f"out: expected a torch tensor of dtype {result.dtype} on {result.device}")
    if tuple(out.shape) not in (tuple(result.shape), tuple(result.shape) + (1,)):
        raise ValueError(f"out: shape {tuple(out.shape)} differs from the result's {tuple(result.shape)}")
    return out.copy_(result.reshape(out.shape))


# ---- registration, once -----------------------------------------------------------------------
def _schema(spec: dict) -> str:
    if spec["family"] == "reduction":
        return "(Tensor src, Tensor? acc, int[] axes, str options) -> Tensor"
    if spec["name"] == "fill":
        return "(Tensor src, float value, str options) -> Tensor"
    if len(spec["operands"]) == 1:
        return "(Tensor src, str options) -> Tensor"
    # a Python scalar operand is None here, its value in `scalars` (in operand order)
    return "(" + "".join(f"Tensor? {o}, " for o in spec["operands"]) + "float[] scalars, str options) -> Tensor"


def _direct(spec: dict):
    """The op's implementation: the op function on plain tensors. Under autograd it runs inside the
    autograd function's forward, grad mode off, so the call takes the direct path."""
    fn, name, reduction = OPS[spec["name"]], spec["name"], spec["family"] == "reduction"
    arity = len(spec["operands"])

    def impl(*args):
        o = options_of(args[-1])
        kw = {k: o[k] for k in OPTION_NAMES if k != "extra"}
        extra = () if o["extra"] is None else (o["extra"],)
        if reduction:
            src, acc, axes = args[0], args[1], args[2]
            out = None if acc is None else acc.clone()
            return fn(src, *extra, axes=tuple(axes), out=out, accum=acc is not None, **kw, **o["config"])
        if name == "fill" or arity == 1:
            return fn(*args[:-1], *extra, **kw, **o["config"])
        scalars = iter(args[arity])
        operands = [next(scalars) if t is None else t for t in args[:arity]]
        return fn(*operands, **kw, **o["config"])
    return impl


def _fake(spec: dict):
    """The result without running: shape from the broadcast and the reduced axes, dtype from the
    first tensor (or cast's dtype), device from the first tensor."""
    import torch
    reduction, name, arity = spec["family"] == "reduction", spec["name"], len(spec["operands"])

    def fake(*args):
        o = options_of(args[-1])
        tensors = [a for a in (args[:1] if reduction or name == "fill" else args[:arity]) if a is not None]
        shape = torch.broadcast_shapes(*(t.shape for t in tensors))
        if reduction:  # into acc= the result takes acc's shape (the result's, or with a trailing 1)
            shape = reduced_shape(tuple(shape), args[2], o["batch_dims"]) if args[1] is None else args[1].shape
        dtype = getattr(torch, o["extra"]) if name == "cast" else tensors[0].dtype
        return tensors[0].new_empty(shape, dtype=dtype)
    return fake


def _batched(spec: dict):
    """vmap's rule for the op (func.py): the vmapped dims to the front, one more batch dim; a reduction's
    src and acc both per sample (one that is not vmapped, expanded)."""
    import torch
    reduction = spec["family"] == "reduction"

    def batched(args, in_dims):
        if all(a.dim() - isinstance(d, int) == 0 for a, d in zip(args, in_dims) if isinstance(a, torch.Tensor)):
            raise ValueError(f"{spec['name']}: under vmap each sample is 0-d (one value), not a tile; vmap over "
                             f"a dim of tensors of at least 2 dims, or call tp.{spec['name']} on the whole tensor")
        if reduction:
            size = next(a.shape[d] for a, d in zip(args[:2], in_dims[:2]) if isinstance(d, int))
            moved = [None if a is None else a.movedim(d, 0) if isinstance(d, int) else a.expand(size, *a.shape)
                     for a, d in zip(args[:2], in_dims[:2])] + list(args[2:])
        else:
            moved = to_the_front(args, in_dims)
        o = options_of(args[-1])
        moved[-1] = options_name(dict(o, batch_dims=o["batch_dims"] + 1))
        return moved
    return batched


def _own_ops():
    """The ops with a custom op of their own: all but the gather ops, which run as tile programs
    (each program signature its own custom op)."""
    return [name for name in OPS if SPECS[name]["family"] != "gather"]


def register() -> None:
    """Defines torch.ops.tileprim.<op> for every op (once); their compiled twins follow torch._dynamo."""
    if _LIBRARY:
        return
    import torch
    _LIBRARY.append(torch.library.Library("tileprim", "DEF"))
    for name in _own_ops():
        spec = SPECS[name]
        TORCH_OPS[name] = define(name, _schema(spec), _direct(spec), _fake(spec), *backward_of(spec))
        FUNC_CALLS[name] = transformable(name, _direct(spec), *backward_of(spec), tangent_of(spec), _batched(spec))
    sum_to.define_op(define)
    after_load("torch._dynamo", _register_compiled_twins)  # torch.compile's first use loads it


def define(name: str, schema: str, impl, fake, backward=None, setup_context=None):
    """torch.ops.tileprim.<name>, once: ``impl`` runs it (CPU and CUDA tensors), ``fake`` gives the
    result without running, ``backward``/``setup_context`` as torch.library.register_autograd takes
    them (none: autograd raises rather than drop a gradient). Each op registers here; a tile program
    registers one op per program signature, its options interned by the same table."""
    import torch
    register()
    lib, qualname = _LIBRARY[0], f"tileprim::{name}"
    torch.library.define(qualname, schema, lib=lib)
    torch.library.impl(qualname, ("cpu", "cuda"), impl, lib=lib)
    torch.library.register_fake(qualname, fake, lib=lib)
    if backward is None:  # autograd calls setup_context only where an input needs a gradient
        def backward(ctx, *grads):
            raise AssertionError("unreachable: setup_context refused")

        def setup_context(ctx, inputs, output):  # (grad mode is off in here)
            raise _no_backward(qualname)
    else:
        add_backward(name, fake, setup_context, backward)
        setup_context = _tracing_the_backward(name, setup_context)
    torch.library.register_autograd(qualname, backward, setup_context=setup_context, lib=lib)
    return getattr(torch.ops.tileprim, name).default


def _tracing_the_backward(name: str, setup_context):
    """``setup_context`` that first, on Dynamo's fake tensors (torch.compile runs it in plain Python
    there, where torch 2.11's is_compiling() is still False), traces the op's backward once per
    signature (``fake_backward``)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    def setup(ctx, inputs, output):
        if torch.compiler.is_compiling() or any(isinstance(x, FakeTensor) for x in inputs):
            trace_backward(name, describe(inputs), tuple(ctx.needs_input_grad))
        setup_context(ctx, inputs, output)
    return setup


def _register_compiled_twins() -> None:
    """Dynamo inlines these in place of the op functions: the graph holds the custom op."""
    import torch
    torch._dynamo.assume_constant_result(intern_options)
    # a layout compares and hashes by value: Dynamo may take it as a constant of the graph (torch
    # releases whose Dynamo reads it as a user object otherwise refuse layout= inside a compile)
    register_constant = getattr(torch.utils._pytree, "register_constant", None)
    if register_constant is not None:
        try:
            register_constant(TileLayout)
        except ValueError:  # registered already (a second registration of the twins)
            pass
    substitute = getattr(torch.compiler, "substitute_in_graph", None)
    if substitute is not None:
        for name in _own_ops():
            substitute(OPS[name], skip_signature_check=True)(op_function(SPECS[name], _torch_call))
