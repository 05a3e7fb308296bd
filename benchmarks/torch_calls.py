"""Small-call host times of tileprim on torch tensors: the direct path, the custom op (an input
that requires grad), and torch.compile(fullgraph=True), each beside torch's own op, called in turn.

    python benchmarks/torch_calls.py                 # CUDA tensors where a GPU is usable, else CPU
    python benchmarks/torch_calls.py --device cpu
"""
from __future__ import annotations

import argparse
import timeit

import torch

import tileprim as tp


def per_call_us(fn, number: int, repeat: int = 7) -> float:
    fn()
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--number", type=int, default=5000)
    args = parser.parse_args()
    device, n = args.device, args.number
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    b = {"backend": "cpu" if device == "cpu" else "cuda"}
    x = torch.randn(4, 8, device=device)
    needs_grad = x.clone().requires_grad_()
    compiled_tp = torch.compile(lambda t: tp.sum(t, batch_dims=1, **b), fullgraph=True)
    compiled_torch = torch.compile(lambda t: t.sum(-1), fullgraph=True)
    cases = [
        ("4x8 row sum, direct path", lambda: tp.sum(x, batch_dims=1, **b), lambda: x.sum(-1)),
        ("4x8 exp, direct path", lambda: tp.exp(x, **b), lambda: x.exp()),
        ("4x8 row sum, requires_grad (custom op + autograd)", lambda: tp.sum(needs_grad, batch_dims=1, **b),
         lambda: needs_grad.sum(-1)),
        ("4x8 row sum, torch.compile(fullgraph=True)", lambda: compiled_tp(x), lambda: compiled_torch(x)),
    ]
    print(f"torch {torch.__version__}, device {device}"
          + (f" ({torch.cuda.get_device_name()})" if device == "cuda" else "") + f", {n} calls, best of 7")
    for name, ours, theirs in cases:
        ours_us, theirs_us = [], []
        for _ in range(3):  # in turn: a busy machine slows both alike
            ours_us.append(per_call_us(ours, n))
            theirs_us.append(per_call_us(theirs, n))
        sync()
        print(f"{name:52s} tileprim {min(ours_us):8.2f} us   torch {min(theirs_us):8.2f} us   "
              f"({min(ours_us) / min(theirs_us):.2f}x)")


if __name__ == "__main__":
    main()
