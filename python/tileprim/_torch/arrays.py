"""PyTorch CUDA tensors: used in place, ordered on torch's current stream of their device; results
are made by torch (``torch.empty_like`` of a broadcast template: the cheapest call per result)."""
from __future__ import annotations

import functools

from .._arrays.adapters import Adapter

__all__ = ["TorchAdapter", "torch_adapter", "refuse_unusual", "refuse_unwritable"]


class TorchAdapter(Adapter):
    library = "torch"
    lazy_view = "is_neg"  # x.conj().imag of a complex x: its memory holds -x.imag until resolve_neg()

    def __init__(self):
        import torch
        self._torch = torch
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self._raw_stream = raw if callable(raw) else None
        # the per-call steps as PyTorch's own C functions: no Python frame of ours on a repeated call
        self.contiguous = torch.Tensor.contiguous
        self.pointer = self.result_pointer = torch.Tensor.data_ptr
        self._wrapped = torch._C._functorch.is_functorch_wrapped_tensor
    # every key holds the negative bit: a repeated call must not take a lazy view for the array it
    # replaced (check_stored refuses it where the call is checked)
    def dense_key(self, x):  # a torch.dtype first: no other library's key starts with one
        # requires_grad: such a tensor's calls take the custom op under grad mode (``ops``); layout: a
        # sparse tensor of a dense one's shape is refused, never run as it; wrapped: a torch.func
        # transform's tensor (one sample's shape, no storage) takes the op's Function (``func``)
        return (x.dtype, x.shape, x.device, x.is_neg(), x.requires_grad, x.layout, self._wrapped(x))

    def key(self, x):
        return (x.dtype, x.shape, x.stride(), x.get_device(), x.is_neg())

    def placed_key(self, x):  # key() inline: one call per array of a repeated collective
        return (type(x), x.dtype, x.shape, x.stride(), x.get_device(), x.is_neg())

    def check_stored(self, x, arg):
        refuse_unusual(x, arg)
        if x.is_neg():
            raise TypeError(f"{arg}: its negative bit is set (a lazy view such as z.conj().imag), so its memory "
                            f"holds the negated values; pass {arg}.resolve_neg()")

    def check_written(self, x, arg):
        refuse_unwritable(x, arg)

    def runnable(self, x):
        from torch._subclasses.fake_tensor import FakeTensor
        return not isinstance(x, FakeTensor) and not self._torch.compiler.is_compiling()

    def device(self, x):
        return x.get_device()

    def strides(self, x):
        return tuple(x.stride())

    def stream(self, device):
        if self._raw_stream is not None:
            return self._raw_stream(device)
        return self._torch.cuda.current_stream(device).cuda_stream

    def stream_of(self, device):
        if self._raw_stream is not None:
            return functools.partial(self._raw_stream, device)
        return super().stream_of(device)

    def streams(self, devices):
        if self._raw_stream is not None:
            return list(map(self._raw_stream, devices))
        return super().streams(devices)

    def empty(self, template, shape, dtype):
        return template.new_empty(shape, dtype=getattr(self._torch, dtype))

    def allocator(self, shape, dtype, device):
        # torch.empty_like of one element broadcast to the shape parses a single argument where
        # torch.empty parses sizes, dtype and device (0.4-1 us less per call on an H100); a
        # broadcast view is not dense, so its results take C-contiguous strides (checked here)
        torch, shape = self._torch, tuple(shape)
        made = torch.empty(shape, dtype=getattr(torch, dtype), device=torch.device("cuda", device))
        template = made if made.numel() <= 1 else torch.empty((), dtype=made.dtype, device=made.device).expand(shape)
        if torch.empty_like(template).stride() == made.stride():
            return functools.partial(torch.empty_like, template)
        return functools.partial(torch.empty, shape, dtype=made.dtype, device=made.device)

    def broadcast(self, x, shape):
        return x.broadcast_to(tuple(shape)).contiguous()


def refuse_unusual(x, arg: str) -> None:
    """TypeError naming ``arg`` for a tensor whose memory is not its values laid out densely: sparse
    and other layouts, nested tensors, a set conjugate bit (complex: no tile holds it)."""
    import torch
    if x.is_nested:
        raise TypeError(f"{arg}: nested tensors are not supported (a tile is dense); pass one tensor per row, "
                        f"or .to_padded_tensor(value) of it")
    if x.layout is not torch.strided:
        raise TypeError(f"{arg}: {x.layout} tensors are not supported (a tile is dense); pass .to_dense() of it")
    if x.is_conj():
        raise TypeError(f"{arg}: dtype {str(x.dtype).replace('torch.', '')} is not supported; tiles hold float16, "
                        f"bfloat16, float32, float64, int32 or int64")


def refuse_unwritable(x, arg: str) -> None:
    """ValueError naming ``arg`` where torch refuses an in-place write of ``x``: one that requires
    grad under grad mode (a call reaches here with no input that does: with one, its custom op
    writes ``x`` where autograd records it), an inference tensor outside torch.inference_mode()."""
    import torch
    if x.requires_grad and torch.is_grad_enabled():
        raise ValueError(f"{arg}: requires grad, and no input does: autograd would not see the write (torch "
                         f"refuses such an out=); pass {arg}.detach() or call under torch.no_grad()")
    if x.is_inference() and not torch.is_inference_mode_enabled():
        raise ValueError(f"{arg}: an inference tensor is written in place only inside torch.inference_mode(), "
                         f"as torch refuses it outside")


_ADAPTER = []  # the one TorchAdapter, made at the first tensor (it reads torch)


def torch_adapter() -> TorchAdapter:
    if not _ADAPTER:
        _ADAPTER.append(TorchAdapter())
    return _ADAPTER[0]
