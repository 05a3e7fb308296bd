"""A Hugging Face Llama (random weights) patched with tileprim's layers as a user would: every
RMSNorm replaced by tileprim.nn.RMSNorm (sharing its weight), every MLP's activation product by
tileprim.nn.SiLUMul, the loss by tileprim.nn.CrossEntropyLoss; training steps beside the unpatched
model (and, with --liger, the same model patched the same way with Liger's layers), the loss and
the gradients compared and the step timed. Needs transformers (tried with 5.x) and a GPU for the
sizes below; not part of the CPU test suite.

    python examples/layers/patch_llama.py [--layers 4] [--hidden 2048] [--batch 8] [--seq 1024]
                                          [--dtype bfloat16] [--scope cta256] [--liger] [--steps 10]

What to look for: loss within 1e-3 (relative) of eager's, gradients within ~2 % (bfloat16 rounds
differently in each), and the step times side by side.
"""
import argparse
import copy
import statistics

import torch
import torch.nn.functional as F

import tileprim as tp
import tileprim.nn as tpnn


def parse_scope(text):
    if text is None:
        return None
    return tp.cta(int(text[3:])) if text.startswith("cta") else getattr(tp, text)


def patch(model, rms_norm, silu_mul):
    """Every LlamaRMSNorm replaced by rms_norm(hidden, eps) holding its weight; every LlamaMLP's
    forward by down(silu_mul(gate(x), up(x)))."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            kind = type(child).__name__
            if kind == "LlamaRMSNorm":
                norm = rms_norm(child.weight.shape[0], child.variance_epsilon)
                norm.weight = child.weight
                setattr(parent, name, norm)
            elif kind == "LlamaMLP":
                child.forward = (lambda mlp: lambda x: mlp.down_proj(silu_mul(mlp.gate_proj(x), mlp.up_proj(x))))(child)
    return model


def causal_loss(model, ids, loss_fn):
    logits = model(input_ids=ids).logits
    return loss_fn(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def step(model, ids, loss_fn):
    model.zero_grad(set_to_none=True)
    loss = causal_loss(model, ids, loss_fn)
    loss.backward()
    return loss.detach().float()


def timed(model, ids, loss_fn, steps):
    times = []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step(model, ids, loss_fn)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def gradient_error(model, reference) -> float:
    num = den = 0.0
    for (name, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
        num += float((p.grad.double() - q.grad.double()).pow(2).sum())
        den += float(q.grad.double().pow(2).sum())
    return (num / den) ** 0.5


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--scope", help="tileprim's programs' scope (e.g. cta256); default none named")
    parser.add_argument("--liger", action="store_true", help="also the model patched with Liger's layers")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    from transformers import LlamaConfig, LlamaForCausalLM

    device, dtype = "cuda" if torch.cuda.is_available() else "cpu", getattr(torch, args.dtype)
    config = LlamaConfig(hidden_size=args.hidden, intermediate_size=args.hidden * 11 // 4, num_hidden_layers=args.layers,
                         num_attention_heads=args.hidden // 128, num_key_value_heads=args.hidden // 128,
                         vocab_size=args.vocab, max_position_embeddings=args.seq)
    torch.manual_seed(0)
    eager = LlamaForCausalLM(config).to(device=device, dtype=dtype)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)
    scope = parse_scope(args.scope)
    models = {"eager": (eager, lambda x, y: F.cross_entropy(x.float(), y))}
    models["tileprim"] = (patch(copy.deepcopy(eager), lambda n, eps: tpnn.RMSNorm(n, eps, scope=scope),
                                tpnn.SiLUMul(scope=scope)), tpnn.CrossEntropyLoss(scope=scope))
    if args.liger:
        from liger_kernel.transformers import LigerCrossEntropyLoss, LigerRMSNorm
        from liger_kernel.transformers.functional import liger_swiglu
        models["liger"] = (patch(copy.deepcopy(eager), lambda n, eps: LigerRMSNorm(n, eps), liger_swiglu),
                           LigerCrossEntropyLoss())
    losses = {name: step(model, ids, loss_fn) for name, (model, loss_fn) in models.items()}
    for name, (model, _) in models.items():
        loss_error = abs(float(losses[name] - losses["eager"])) / abs(float(losses["eager"]))
        print(f"{name}: loss {float(losses[name]):.6f} (relative to eager's {loss_error:.2e}), gradients "
              f"{gradient_error(model, eager):.2%} from eager's")
        if name == "tileprim":
            assert loss_error <= 1e-3, loss_error
    if device == "cuda":
        for name, (model, loss_fn) in models.items():
            print(f"{name}: training step {timed(model, ids, loss_fn, args.steps):.1f} ms (median of {args.steps})")


if __name__ == "__main__":
    main()
