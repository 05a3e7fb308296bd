"""The layers LLMs are made of (issue 48), forward and forward + backward: SwiGLU's SiLU-mul,
GeGLU's GELU-mul (tanh), LayerNorm and the cross-entropy of logits over a vocabulary. tileprim's
programs through tileprim.nn (no scope named, unless --scope) beside torch eager, torch.compile of
the same code and Liger's kernels, bfloat16, at the shapes Liger's benchmarks use; each side's
result checked against float64 on its first rows, and tileprim's first rows against the CPU
backend's bits, in the same run. "tileprim fastmath" is the same programs with fastmath=True (the
GPU's approximations in their silu, tanh, rsqrt, exp and log steps, forward and backward; its
bits are the GPU's, so only checked against float64), with its own ratio to the best peer.

    python benchmarks/llm_layers.py [--quick] [--only TEXT] [--scope cta256] [--json PATH]
    python benchmarks/llm_layers.py --smoke      # no GPU: CPU backend on torch CPU tensors, tiny shapes

Timing: CUDA events around batches of 5 back-to-back calls after a warm-up that also compiles, the
median of 15 batches. TB/s counts the fewest bytes: forward, the inputs read and the outputs
written; forward + backward, that plus the backward's reads (the inputs, the output's gradient)
and writes (the inputs' gradients; small ones like a norm's weight left out). Ratio: the best
peer's time over tileprim's (above 1: tileprim is faster). A side that cannot run says why (n/a).

Liger: the liger-kernel wheel (0.8.5, py3-none-any; any 0.6+ has the functional API used here,
liger_swiglu, liger_geglu, liger_layer_norm, liger_cross_entropy; its Triton kernels need the GPU's
triton), which benchmarks/on_gpu.sh installs from .whl/ where carried; without it Liger's column
is n/a with the reason.
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from typing import Callable, Dict, Optional

import torch
import torch.nn.functional as F

import tileprim as tp
import tileprim.nn as tpnn
from tileprim_bench.timing import CudaEventTimer, WallTimer

GPU_SHAPES = {  # (tokens, features): Liger's benchmark shapes (hidden 4096; intermediate 11008, 14336; vocab)
    "silu_mul": [(8192, 11008), (16384, 14336)],
    "gelu_mul": [(8192, 11008), (16384, 14336)],
    "layer_norm": [(8192, 4096), (16384, 4096)],
    "cross_entropy": [(8192, 32000), (8192, 128256)],
}
SMOKE_SHAPES = {"silu_mul": [(16, 72)], "gelu_mul": [(16, 72)], "layer_norm": [(12, 96)], "cross_entropy": [(12, 500)]}
CHECK_ROWS = 64
FAST = "tileprim fastmath"  # the side of tileprim's programs with fastmath=True
TOLERANCE = 2.0 ** -7  # ||got - want|| / ||want|| of a bfloat16 result (or gradient) on the rows checked


def _liger():
    try:
        import liger_kernel.transformers.functional as liger
        return liger
    except Exception as e:  # noqa: BLE001 (any import failure is the column's reason)
        return f"liger_kernel not importable ({type(e).__name__}: {e})"


class Layer:
    """One layer: its inputs, each side's function of them, the float64 oracle, bytes moved."""

    def __init__(self, name: str, make: Callable, sides: Dict[str, Callable], oracle: Callable, elements: Callable):
        self.name, self.make, self.sides, self.oracle, self.elements = name, make, sides, oracle, elements


def _gelu_tanh64(a):
    return 0.5 * a * (1 + torch.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))


def layers(scope, liger) -> Dict[str, Layer]:
    silu_mul, gelu_mul = tpnn.SiLUMul(scope=scope), tpnn.GELUMul(scope=scope)
    ce = tpnn.CrossEntropyLoss(scope=scope)
    fast_silu_mul, fast_gelu_mul = tpnn.SiLUMul(scope=scope, fastmath=True), tpnn.GELUMul(scope=scope, fastmath=True)
    fast_ce = tpnn.CrossEntropyLoss(scope=scope, fastmath=True)

    def pair(shape, device, g):
        return [torch.randn(shape, generator=g, device=device).to(torch.bfloat16) * s for s in (3.0, 1.0)]

    def norm_inputs(shape, device, g):
        x = torch.randn(shape, generator=g, device=device).mul(2).add(0.5).to(torch.bfloat16)
        w = torch.rand(shape[1], generator=g, device=device).add(0.5).to(torch.bfloat16)
        b = torch.randn(shape[1], generator=g, device=device).to(torch.bfloat16)
        return [x, w, b]

    def ce_inputs(shape, device, g):
        logits = (torch.randn(shape, generator=g, device=device) * 4).to(torch.bfloat16)
        labels = torch.randint(0, shape[1], (shape[0],), generator=g, device=device)
        labels[::10] = -100
        return [logits, labels]

    def layer_norm_tp(x, w, b, fastmath=False):  # tileprim.nn.LayerNorm's call, its weight and bias as inputs
        return tp.layers.layer_norm(x, w, b, 1e-5, batch_dims=1, scope=scope,
                                    backend="cpu" if x.device.type == "cpu" else None, fastmath=fastmath)

    def liger_side(fn):
        return fn if not isinstance(liger, str) else liger

    return {
        "silu_mul": Layer("silu_mul", pair, {"tileprim": silu_mul, FAST: fast_silu_mul,
                                             "torch": lambda a, b: F.silu(a) * b,
                                             "liger": liger_side(lambda a, b: liger.liger_swiglu(a, b))},
                          lambda a, b: F.silu(a) * b, lambda m, n: (3 * m * n, 5 * m * n)),
        "gelu_mul": Layer("gelu_mul", pair, {"tileprim": gelu_mul, FAST: fast_gelu_mul,
                                             "torch": lambda a, b: F.gelu(a, approximate="tanh") * b,
                                             "liger": liger_side(lambda a, b: liger.liger_geglu(a, b))},
                          lambda a, b: _gelu_tanh64(a) * b, lambda m, n: (3 * m * n, 5 * m * n)),
        "layer_norm": Layer("layer_norm", norm_inputs, {
            "tileprim": layer_norm_tp, FAST: functools.partial(layer_norm_tp, fastmath=True),
            "torch": lambda x, w, b: F.layer_norm(x, (x.shape[1],), w, b, 1e-5),
            "liger": liger_side(lambda x, w, b: liger.liger_layer_norm(x, w, b, 1e-5))},
            lambda x, w, b: F.layer_norm(x, (x.shape[1],), w, b, 1e-5), lambda m, n: (2 * m * n, 3 * m * n)),
        "cross_entropy": Layer("cross_entropy", ce_inputs, {
            "tileprim": ce, FAST: fast_ce, "torch": lambda x, y: F.cross_entropy(x, y),
            "liger": liger_side(lambda x, y: liger.liger_cross_entropy(x, y, ignore_index=-100))},
            lambda x, y: F.cross_entropy(x, y), lambda m, n: (m * n, 2 * m * n)),
    }


def _differentiable(inputs):
    return [t for t in inputs if t.is_floating_point()]


def _run(fn, inputs, g, backward: bool):
    """The forward (no grad), or the forward and the inputs' gradients for output gradient g."""
    if not backward:
        with torch.no_grad():
            return (fn(*inputs),)
    leaves = [t.detach().requires_grad_() if t.is_floating_point() else t for t in inputs]
    y = fn(*leaves)
    return (y, *torch.autograd.grad(y, _differentiable(leaves), g if y.dim() else None))


def _relative_error(got, want) -> float:
    got, want = got.detach().double(), want.detach().double()
    return float(torch.linalg.vector_norm(got - want) / torch.linalg.vector_norm(want).clamp_min(1e-300))


def check(layer: Layer, fn, inputs, backward: bool) -> float:
    """The worst relative error of fn's results (and gradients) on the first rows against float64."""
    rows = [t[:CHECK_ROWS] if t.dim() and t.shape[0] == inputs[0].shape[0] else t for t in inputs]
    g = None
    if backward:
        with torch.no_grad():
            shape = layer.oracle(*[t.double() if t.is_floating_point() else t for t in rows]).shape
        g = torch.randn(shape, generator=torch.Generator(device="cpu").manual_seed(7)).to(rows[0].device)
    # the oracle first: Liger's SwiGLU/GeGLU backward writes its gradients into its inputs' storage
    want = _run(layer.oracle, [t.double() if t.is_floating_point() else t for t in rows],
                None if g is None else g.double(), backward)
    got = _run(fn, rows, None if g is None else g.to(rows[0].dtype) if g.dim() else g, backward)
    return max(_relative_error(a, b) for a, b in zip(got, want))


def cpu_bits_equal(layer: Layer, inputs, backward: bool) -> bool:
    """tileprim's results on the first rows: the GPU's bits are the CPU backend's (tileprim.nn runs
    where its inputs lie)."""
    rows = [t[:CHECK_ROWS] if t.dim() and t.shape[0] == inputs[0].shape[0] else t for t in inputs]
    fn = layer.sides["tileprim"]
    g = None
    if backward:
        with torch.no_grad():
            y = fn(*rows)
        g = torch.ones_like(y) if y.dim() else None
    gpu = _run(fn, rows, g, backward)
    cpu = _run(fn, [t.cpu() for t in rows], None if g is None else g.cpu(), backward)
    return all(torch.equal(a.cpu(), b) for a, b in zip(gpu, cpu))


def measure(layer: Layer, shape, backward: bool, timer, device, compile_ok: bool) -> dict:
    g = torch.Generator(device=device).manual_seed(0)
    inputs = layer.make(shape, device, g)
    fns = {name: fn for name, fn in layer.sides.items()}
    if compile_ok:
        fns["torch.compile"] = torch.compile(layer.sides["torch"])
    else:
        fns["torch.compile"] = "timed on the GPU only"
    read_write = layer.elements(*shape)[1 if backward else 0]
    row = {"case": f"{layer.name} {'fwd+bwd' if backward else 'fwd'} {shape[0]}x{shape[1]} bfloat16", "sides": {}}
    out_grad = None
    if backward:
        with torch.no_grad():
            y = layer.sides["torch"](*inputs)
        out_grad = torch.randn(y.shape, generator=g, device=device).to(y.dtype) if y.dim() else None
    for name, fn in fns.items():
        if isinstance(fn, str):
            row["sides"][name] = {"n/a": fn}
            continue
        # each side its own inputs: Liger's cross-entropy writes its gradient into the logits
        own = [t.clone() for t in inputs]
        try:
            error = check(layer, fn, own, backward)
            ms = timer(lambda: _run(fn, own, out_grad, backward))
            side = {"ms": ms, "TB/s": read_write * 2 / ms / 1e9, "error": error, "ok": error <= TOLERANCE}
            if name == "tileprim" and device == "cuda":
                side["cpu_bits_equal"] = cpu_bits_equal(layer, own, backward)
            row["sides"][name] = side
        except Exception as e:  # noqa: BLE001 (a side that cannot run says why)
            row["sides"][name] = {"n/a": f"{type(e).__name__}: {' '.join(str(e).split())[:400]}"}
        del own
    peers = [s["ms"] for n, s in row["sides"].items() if not n.startswith("tileprim") and "ms" in s]
    for ours, key in (("tileprim", "ratio"), (FAST, "ratio fastmath")):
        if peers and "ms" in row["sides"].get(ours, {}):
            row[key] = min(peers) / row["sides"][ours]["ms"]
    return row


def show(row: dict) -> str:
    cells = []
    for name, s in row["sides"].items():
        if "ms" in s:
            extra = "" if s["ok"] else f" WRONG (error {s['error']:.1e})"
            if "cpu_bits_equal" in s:
                extra += "" if s["cpu_bits_equal"] else " CPU BITS DIFFER"
            cells.append(f"{name} {s['ms']:.3f} ms {s['TB/s']:.2f} TB/s{extra}")
        else:
            cells.append(f"{name} n/a ({s['n/a']})")
    ratio = "".join(f"  {key} {row[key]:.2f}" for key in ("ratio", "ratio fastmath") if key in row)
    return f"{row['case']}:{ratio}\n    " + "\n    ".join(cells)


def parse_scope(text: Optional[str]):
    if text is None:
        return None
    if text in ("thread", "warp", "warpgroup"):
        return getattr(tp, text)
    if text.startswith("cta"):
        return tp.cta(int(text[3:]))
    raise SystemExit(f"--scope: {text!r} is not thread, warp, warpgroup or ctaN")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="no GPU: the CPU backend on tiny shapes")
    parser.add_argument("--quick", action="store_true", help="the first shape of each layer only")
    parser.add_argument("--only", action="append", default=[], help="cases whose name holds this text")
    parser.add_argument("--scope", help="a scope for tileprim's programs (thread, warp, warpgroup, ctaN); "
                                        "default none: the programs' own choice")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    gpu = not args.smoke and torch.cuda.is_available()
    if not args.smoke and not gpu:
        raise SystemExit("no CUDA GPU: run with --smoke for the CPU backend")
    device = "cuda" if gpu else "cpu"
    timer = CudaEventTimer(torch, repeats=15, inner=5) if gpu else WallTimer(3, warmup=1)
    table = layers(parse_scope(args.scope), _liger() if gpu else "Liger runs on the GPU only")
    shapes = SMOKE_SHAPES if not gpu else GPU_SHAPES
    rows = []
    print(f"timing: {timer.describe()}; tileprim scope: {args.scope or 'none named'}")
    for name, layer in table.items():
        for shape in shapes[name][:1] if args.quick else shapes[name]:
            for backward in (False, True):
                case = f"{name} {'fwd+bwd' if backward else 'fwd'} {shape[0]}x{shape[1]}"
                if args.only and not any(text in case for text in args.only):
                    continue
                row = measure(layer, shape, backward, timer, device, compile_ok=gpu)
                rows.append(row)
                print(show(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    broken = [r["case"] for r in rows if any(s.get("ok") is False or s.get("cpu_bits_equal") is False
                                             for s in r["sides"].values())]
    if broken:
        print("wrong results or CPU bits that differ: " + "; ".join(broken))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
