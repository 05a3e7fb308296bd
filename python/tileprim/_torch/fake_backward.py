"""A custom op's backward traced once on fake tensors, as AOTAutograd traces it, when torch.compile
meets a call that needs a gradient: the tileprim ops that backward calls (a tile program's derived
backward, the sums of a broadcast operand's gradient) get registered, and their call options
interned, in this process. It runs from the op's ``setup_context`` on Dynamo's fake tensors (torch
runs that in plain Python, where a traced size has a hint), not from the code Dynamo traces.

Why: Inductor's on-disk cache (and AOTAutograd's, both on by default) keeps a compiled backward
that calls tileprim's custom ops by name, their options by their interned names. A second process
that compiles the same function loads it without tracing the backward, so the ops and options it
names must be made there when Dynamo traces the forward, which every process does."""
from __future__ import annotations

from typing import Dict, Set, Tuple


__all__ = ["add_backward", "describe", "trace_backward"]

_BACKWARDS: Dict[str, tuple] = {}  # op name -> (fake, setup_context, backward)
_TRACED: Set[tuple] = set()
_TENSOR = "Tensor"  # a described tensor: (_TENSOR, dtype, shape, device)


def add_backward(name: str, fake, setup_context, backward) -> None:
    """Op ``name``'s backward as registered with torch, for ``trace_backward``."""
    _BACKWARDS[name] = (fake, setup_context, backward)


def describe(args) -> tuple:
    """The op's arguments as constants: a tensor as its dtype, shape and device (a traced size as
    the size it was traced at), a list as a tuple."""
    import torch
    return tuple((_TENSOR, str(a.dtype).replace("torch.", ""), tuple(map(_hint, a.shape)), str(a.device))
                 if isinstance(a, torch.Tensor) else tuple(a) if isinstance(a, list) else a for a in args)


def _hint(size) -> int:
    node = getattr(size, "node", None)  # a torch.SymInt: the size it stands for in this trace
    return int(size if node is None or node.hint is None else node.hint)


def trace_backward(name: str, described: tuple, needs: Tuple[bool, ...]) -> bool:
    """Runs op ``name``'s backward once per signature on fake tensors of the described arguments
    (``needs``: ctx.needs_input_grad)."""
    key = (name, described, needs)
    if key in _TRACED or name not in _BACKWARDS or not any(needs):
        return False
    _TRACED.add(key)
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    fake, setup_context, backward = _BACKWARDS[name]
    try:
        with FakeTensorMode(), torch.no_grad():
            args = tuple(torch.empty(d[2], dtype=getattr(torch, d[1]), device=d[3]) if _is_tensor(d)
                         else list(d) if type(d) is tuple else d for d in described)
            output = fake(*args)
            ctx = _Context(needs)
            setup_context(ctx, args, output)
            backward(ctx, *(torch.empty_like(o) for o in (output if isinstance(output, tuple) else (output,))))
    except Exception:  # a backward that cannot be traced (a gradient a program cannot give): AOTAutograd's
        return False   # own trace of it meets the same error and reports it as it always has
    return True


def _is_tensor(d) -> bool:
    return type(d) is tuple and len(d) == 4 and d[0] == _TENSOR


class _Context:
    """What a backward reads of autograd's ctx."""

    def __init__(self, needs: Tuple[bool, ...]):
        self.needs_input_grad, self.saved_tensors = needs, ()

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tensors

    def save_for_forward(self, *tensors) -> None:  # forward mode's (grad.py saves for both): no backward reads it
        pass
