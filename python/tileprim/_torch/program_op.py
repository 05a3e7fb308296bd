"""A tile program called on torch tensors that need autograd, on fake or functional tensors, or
inside ``torch.compile``: one ``torch.library`` custom op per call signature
(``torch.ops.tileprim.program_<name>_<digest>``), its tensors the arguments (scalars are constants of
the signature), a fake implementation giving the results' shapes and dtypes, and a backward that
runs the program derived from the forward's steps (``backward.py``) as one more tile program. An
argument broadcast over the batch gets its gradient summed back to its shape by tileprim's own
sums (``sum_to``: the same bits on the CPU and the GPU), as the standalone ops' broadcast operands do.

Under ``torch.compile`` the call's signature is worked out from the tensors' metadata and the op
registered by a function Dynamo runs rather than traces (``torch._dynamo.assume_constant_result``);
the graph holds the custom op. The tile dims are part of the signature (a traced one is
specialised: a new tile shape compiles again); the batch dims are not, beyond which of them are 1
(broadcast), so one op serves every batch and a dynamic batch size stays dynamic.

An op's name is a function of what it computes (the program's name, then a digest of its traced
steps and the call's tile shapes, dtypes, device and options), never of the order a process met it:
Inductor's on-disk cache keeps compiled code that calls ops by name, and a second process loading
it must find the same op under the same name. A compiled backward loaded from that cache is not
traced again, so the backward's ops are registered where the forward's are: when Dynamo meets a
call whose tensors need a gradient, the backward is traced once on fake tensors as AOTAutograd
traces it (``fake_backward``, from the op's ``setup_context``)."""
from __future__ import annotations

import functools
import hashlib
import re
from typing import Dict, Optional, Tuple

import numpy as np

from .._arrays.dtypes import numpy_dtype
from .._calls.scope import scope_of_key
from .._program.backward import derive_backward
from .._program.keys import PROGRAMS
from .._program.scalar_argument import is_run_time_float
from .after_load import after_load
from . import folded_gradients
from .func import to_the_front, transforms_active, unroutable
from .ops import define
from .options import constant
from .sum_to import sums_to

__all__ = ["ProgramOp", "call_program_op"]

_OPS: Dict[tuple, "ProgramOp"] = {}
_NAMED: Dict[str, "ProgramOp"] = {}  # an op per name: equal programs (say, made again) share theirs


def call_program_op(program, args, batch_dims, scope, backend, target, out, fastmath=False, eager=False):
    """Runs the call through its signature's custom op (registered on its first call); ``eager``
    (plain tensors under autograd, outside torch.compile): through the op's own forward and backward
    in a torch.autograd.Function, without torch.library's dispatch around them, which cost about
    0.1 ms a call (a norm's forward + backward on an H200 is 0.2 ms of kernels)."""
    import torch
    tensors = [x for x in args if isinstance(x, torch.Tensor)]
    scope_key = None if scope is None else scope.key
    if eager:
        op, one_in_a_tuple = _eager_op(program, args, batch_dims, scope_key, backend, target, fastmath)
        result = _eager_call()(op, *tensors)
    else:
        name, one_in_a_tuple = op_name(*constant((program._key, _described(args, batch_dims), batch_dims,
                                                  scope_key, backend, target, fastmath)))
        result = getattr(torch.ops.tileprim, name).default(*tensors)
    if one_in_a_tuple:
        result = (result,)
    if out is None:
        return result
    several = isinstance(result, (tuple, list))
    outs, results = (out, result) if several else ((out,), (result,))
    if several != isinstance(out, tuple) or len(outs) != len(results):
        given = f"a tuple of {len(out)}" if isinstance(out, tuple) else type(out).__name__
        raise TypeError(f"out: expected {'a tuple of ' if several else ''}{len(results)} torch tensor"
                        f"{'s' if len(results) > 1 else ''}, one per result, not {given}")
    for k, (o, r) in enumerate(zip(outs, results)):  # all checked before any is written
        where = f"out[{k}]" if several else "out"
        if not isinstance(o, torch.Tensor) or o.dtype != r.dtype or o.device != r.device:
            raise TypeError(f"{where}: expected a torch tensor of dtype {r.dtype} on {r.device}")
        if o.shape != r.shape:
            raise ValueError(f"{where}: shape {tuple(o.shape)} differs from the result's {tuple(r.shape)}")
    for o, r in zip(outs, results):
        o.copy_(r)  # the graph records the copy: autograd sees out=
    return out


def _described(args, batch_dims) -> tuple:
    """The call's signature as op_name takes it: (dtype, shape, device) per tensor, scalars as they
    are; a shape's batch dims as None but those of 1 (``_generic``). Under torch.compile a traced tile
    dim becomes its value (``options.constant``)."""
    import torch
    tensors = [x for x in args if isinstance(x, torch.Tensor)]
    tile_rank = max([x.ndim for x in tensors]) - batch_dims  # a list: older Dynamo takes no generator here
    return tuple((str(x.dtype).replace("torch.", ""), _generic(tuple(x.shape), tile_rank), str(x.device))
                 if isinstance(x, torch.Tensor) else x for x in args)


def _generic(shape: tuple, tile_rank: int) -> tuple:
    """``shape`` with its batch dims as None but those of 1: the signature of every batch size."""
    cut = max(0, len(shape) - tile_rank)
    return tuple(None if d is None or d != 1 else 1 for d in shape[:cut]) + tuple(constant(d) for d in shape[cut:])


_EAGER: Dict[tuple, tuple] = {}  # an eager call's signature, as torch holds it -> (its op, one result in a tuple)
_EAGER_LIMIT = 4096


def _eager_op(program, args, batch_dims, scope_key, backend, target, fastmath):
    """The op of a call on plain tensors (op_name's), keyed on the tensors' own dtype, size and device
    objects: a repeated call builds none of the signature's strings."""
    import torch
    key = (program._key, batch_dims, scope_key, backend, target, fastmath,
           tuple((x.dtype, x.shape, x.device) if isinstance(x, torch.Tensor) else _scalar_key(x) for x in args))
    known = _EAGER.get(key)
    if known is None:
        if len(_EAGER) >= _EAGER_LIMIT:  # a new scalar value each call: forget the ops torch never registered
            _forget_unregistered()
        op = _program_op(program._key, _described(args, batch_dims), batch_dims, scope_key, backend, target,
                         fastmath)
        known = _EAGER[key] = (op, op.one_in_a_tuple)
    return known


def _forget_unregistered() -> None:
    _EAGER.clear()
    for table in (_OPS, _NAMED):
        for key in [k for k, op in table.items() if not op.defined]:
            del table[key]


def op_name(program_key: str, described: tuple, batch_dims, scope_key, backend, target,
            fastmath=False) -> Tuple[str, bool]:
    """The custom op's name for this signature (registered with torch the first time), and whether
    the program returns its one result in a tuple (the op returns it bare: a schema's one-element
    tuple is a Tensor)."""
    op = _program_op(program_key, described, batch_dims, scope_key, backend, target, fastmath)
    op.define()
    return op.name, op.one_in_a_tuple


def _program_op(program_key: str, described: tuple, batch_dims, scope_key, backend, target,
                fastmath=False) -> "ProgramOp":
    """The signature's ProgramOp, made the first time (not registered with torch: an eager call runs
    its forward and backward itself). A shape's batch dims are None but those of 1 (any batch size:
    given, they are made so), its tile dims ints."""
    tile_rank = max((len(d[1]) for d in described if type(d) is tuple), default=0) - batch_dims
    described = tuple((d[0], _generic(d[1], tile_rank), d[2]) if type(d) is tuple else d for d in described)
    key = (program_key, tuple(d if type(d) is tuple else _scalar_key(d) for d in described), batch_dims,
           scope_key, backend, target, fastmath)
    op = _OPS.get(key)
    if op is None:
        scope = None if scope_key is None else scope_of_key(scope_key)
        options = dict(batch_dims=batch_dims, scope=scope, backend=backend, target=target, fastmath=fastmath)
        made = ProgramOp(PROGRAMS[program_key], described, options)
        op = _OPS[key] = _NAMED.setdefault(made.name, made)
    return op


def _scalar_key(x) -> tuple:
    """A scalar argument as a key: by type and repr (-0.0 is not 0.0, True not 1, equal as keys), a NaN
    by its bits (its sign reaches the results: x * t of a -NaN t is -NaN on the CPU)."""
    return (type(x), repr(x)) if x == x else (type(x), np.asarray(x).tobytes().hex())


def _constant_under_dynamo() -> None:
    import torch
    torch._dynamo.assume_constant_result(op_name)


after_load("torch._dynamo", _constant_under_dynamo)  # Dynamo runs op_name, not traces it


class ProgramOp:
    """One program call signature as a torch custom op with a derived backward."""

    def __init__(self, program, described: tuple, options: dict):
        import torch
        self.program, self.options = program, options
        self.is_tensor = [type(d) is tuple for d in described]
        self.scalars = [d for d in described if type(d) is not tuple]
        self.floats = [float(d) for d in self.scalars if is_run_time_float(d)]  # its run-time scalars, in order
        # traced on stand-ins of the tensors' shapes and dtypes (fake tensors hold no values; a batch
        # dim of any size, 2) and planned for the CPU: only the steps and the results' tiles are read here
        stand_ins = [np.broadcast_to(np.zeros((), numpy_dtype(d[0])), tuple(2 if n is None else n for n in d[1]))
                     if type(d) is tuple else d for d in described]
        batch_dims = options["batch_dims"]
        bound = program._prepare(stand_ins, batch_dims, options["scope"], "cpu", None)
        self.tile_rank = max(len(d[1]) for d in described if type(d) is tuple) - batch_dims
        self.trace, self.output_ids, self.as_tuple = bound.trace, bound.output_ids, bound.as_tuple
        self.stopped_results = bound.stopped_outputs  # returned through tp.stop_gradient: no gradient back
        # a result tile of shape () is one value per batch entry: its gradient goes in as (..., 1)
        self.scalar_results = [bound.trace.tiles[i].shape == () for i in bound.output_ids]
        self.results = [(shape[batch_dims:], getattr(torch, dtype)) for shape, dtype in bound.results]  # tiles
        self.backwards: Dict[Tuple[bool, ...], Optional[tuple]] = {}
        self.folds: Dict[Tuple[bool, ...], object] = {}  # per needs: the FoldedBackward, or None
        self.several = len(self.results) > 1
        # the program returns its one result in a tuple (the op returns it bare: a schema's one-element
        # tuple is a Tensor)
        self.one_in_a_tuple = self.as_tuple and not self.several
        self.name = _name(program, bound.trace, described, options)
        self.defined = False

    def define(self) -> None:
        """Registers the op with torch (once)."""
        if self.defined:
            return
        self.defined = True
        params = [name for name, t in zip(self.program._params, self.is_tensor) if t]
        schema = "(" + ", ".join(f"Tensor {_identifier(n)}" for n in params) + ") -> " + (
            "(" + ", ".join("Tensor" for _ in self.results) + ")" if self.several else "Tensor")
        define(self.name, schema, self._impl, self._fake, self._backward, self._setup)

    def _arguments(self, tensors):
        it, scalars = iter(tensors), iter(self.scalars)
        return [next(it) if t else next(scalars) for t in self.is_tensor]

    def _impl(self, *tensors):
        o = self.options  # grad mode is off in here and the tensors are plain: no route takes the call
        result = self.program._run(self._arguments(tensors), o["batch_dims"], o["scope"], o["backend"], o["target"],
                                   o["fastmath"])
        return result[0] if self.one_in_a_tuple else result

    def _fake(self, *tensors):
        batch = self._batch(tensors)
        made = tuple(tensors[0].new_empty(batch + shape, dtype=dtype) for shape, dtype in self.results)
        return made if self.several else made[0]

    def _batch(self, tensors) -> tuple:
        """The call's batch shape: its tensors' batch dims broadcast (traced sizes stay traced)."""
        import torch
        return tuple(torch.broadcast_shapes(*(t.shape[:max(0, t.ndim - self.tile_rank)] for t in tensors)))

    def _setup(self, ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def _backward(self, ctx, *grads):
        return self.gradients(ctx.saved_tensors, tuple(ctx.needs_input_grad), grads)

    def gradients(self, inputs, needs: Tuple[bool, ...], grads) -> tuple:
        """The inputs' gradients (None where not needed) from the results' (None for a zero one)."""
        import torch
        derived = self._derived(needs)
        if derived is None:
            return (None,) * len(inputs)
        program, wanted, sources = derived
        if any(g is None for g in grads):  # the batch shape (torch's broadcast: some us) only where needed
            batch = self._batch(inputs)
            grads = [torch.zeros(batch + shape, dtype=dtype, device=inputs[0].device) if g is None else g
                     for g, (shape, dtype) in zip(grads, self.results)]
        grads = [g.reshape(*g.shape, 1) if scalar else g for g, scalar in zip(grads, self.scalar_results)]
        arguments = [*inputs, *grads]
        called = [*arguments, *self.floats]  # the backward program's arguments: the forward's floats last
        # plain tensors outside grad mode: no route can take the backward's calls (a backward of the
        # backward, fake tensors under torch.compile, torch.func's tensors take them)
        plain = unroutable(arguments)
        if folded_gradients.ENABLED and plain:  # the opt-in fold (off: nothing more on this path)
            if needs not in self.folds:
                self.folds[needs] = folded_gradients.folded_backward(program, wanted, sources, inputs, called,
                                                                     self.options)
            if self.folds[needs] is not None:
                return self.folds[needs].gradients(wanted, inputs, called, self.options)
        o = self.options
        made = [] if program is None else list(
            program._unrouted(called, o["batch_dims"], o["scope"], o["backend"], o["target"], o["fastmath"]) if plain
            else program(*called, **o))
        # a gradient passed on is the argument itself, one shared by two inputs one result: no copy
        computed = [arguments[k] if kind == "argument" else made[k] for kind, k in sources]
        out = [None] * len(inputs)
        alike = {}  # gradients summed to one shape from one shape and dtype: summed together
        for k, (i, g) in enumerate(zip(wanted, computed)):
            key = (tuple(g.shape), g.dtype, tuple(inputs[i].shape))
            try:
                alike.setdefault(key, []).append((i, g))
            except TypeError:  # a symbolic (traced) size is not hashed: alone
                alike[k] = [(i, g)]
        for pairs in alike.values():
            summed = sums_to([g for _, g in pairs], inputs[pairs[0][0]].shape, self.options["backend"],
                             self.options["target"])
            for (i, _), s in zip(pairs, summed):
                out[i] = s
        return tuple(out)

    def _derived(self, needs: Tuple[bool, ...]):
        """(the backward program, the arguments it gives gradients, where each gradient is) for these
        needs (derive_backward's), or None; the program is None where every gradient is passed on."""
        if needs not in self.backwards:
            derived = derive_backward(self.trace, self.output_ids, needs, self.stopped_results, self.floats)
            if derived is not None and derived[0] is not None:  # the forward's kind, scope, storage and autotune
                derived = (type(self.program)(derived[0], self.trace.scope, self.program._storage,
                                              autotune=self.program._autotune), *derived[1:])
            self.backwards[needs] = derived
        return self.backwards[needs]


@functools.lru_cache(maxsize=None)
def _eager_call():
    """A function running a ProgramOp's forward and backward in a torch.autograd.Function (made once
    torch is loaded). Two of them: torch.func's transforms take only a Function whose forward leaves
    the context to ``setup_context``, and torch's apply binds that style's arguments through
    ``inspect.signature`` at every call (about 90 us on this CPU, half a norm's kernel time on an
    H200); so that style only where a transform is active, with vmap's rule (func.py's)."""
    import torch

    class _ProgramCall(torch.autograd.Function):
        @staticmethod
        def backward(ctx, *grads):
            return (None,) + ctx.op.gradients(ctx.saved_tensors, tuple(ctx.needs_input_grad[1:]), grads)

    class EagerProgramCall(_ProgramCall):
        @staticmethod
        def forward(ctx, op, *tensors):
            ctx.op = op
            ctx.save_for_backward(*tensors)
            return _returned(op._impl(*tensors))

    class TransformableProgramCall(_ProgramCall):
        @staticmethod
        def forward(op, *tensors):
            return _returned(op._impl(*tensors))

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.op = inputs[0]
            ctx.save_for_backward(*inputs[1:])

        @staticmethod
        def vmap(info, in_dims, op, *tensors):  # the vmapped dims to the front, one more batch dim
            dims = in_dims[1:]
            if any(isinstance(d, int) and t.dim() - 1 < op.tile_rank for t, d in zip(tensors, dims)):
                # a sample of fewer dims than the tile is a tile of its own rank, which no batch dim
                # keeps (the program cuts each argument's last tile-rank dims): sample by sample
                each = [call(op, *(t.select(d, i) if isinstance(d, int) else t for t, d in zip(tensors, dims)))
                        for i in range(info.batch_size)]
                if isinstance(each[0], tuple):
                    return tuple(torch.stack(r) for r in zip(*each)), (0,) * len(each[0])
                return torch.stack(each), 0
            moved = to_the_front(tensors, dims)
            o = op.options
            batched, _ = _eager_op(op.program, op._arguments(moved), o["batch_dims"] + 1,
                                   None if o["scope"] is None else o["scope"].key, o["backend"], o["target"],
                                   o["fastmath"])
            result = call(batched, *moved)
            return result, (0,) * len(result) if isinstance(result, tuple) else 0

    def call(op, *tensors):
        return (TransformableProgramCall if transforms_active() else EagerProgramCall).apply(op, *tensors)

    return call


def _returned(result):
    return tuple(result) if isinstance(result, list) else result


def _name(program, trace, described: tuple, options: dict) -> str:
    """program_<name>_<digest>: the digest of what the op computes (the traced steps, the call's
    shapes, dtypes, device, scalars and options, the program's storage and staging), the same in
    every process; a step's source line (for messages only) left out."""
    steps = [{k: v for k, v in step.items() if k != "where"} for step in trace.steps]
    described = tuple(d if type(d) is tuple or d == d else _scalar_key(d) for d in described)  # a NaN's sign
    computed = (trace.inputs, steps, repr(trace.scope), described, sorted(options.items(), key=lambda kv: kv[0]),
                program._storage, program._staging)
    digest = hashlib.sha256(repr(computed).encode()).hexdigest()[:16]
    return f"program_{_identifier(program.__qualname__.replace('.<locals>', ''))}_{digest}"


def _identifier(name: str) -> str:
    return re.sub(r"\W", "_", name) or "program"
