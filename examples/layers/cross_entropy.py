"""Cross-entropy over a vocabulary: each row's loss logsumexp(x) - x[label] as a tile program with
int32 or int64 labels, 0 where the label is ignore_index, NaN where a label lies outside the row
(never a stray read); the mean over the kept rows by torch (tileprim.nn.CrossEntropyLoss). Checked
against float64, and CrossEntropyLoss's backward (one program, tp.layers.cross_entropy_backward,
from the forward's row max and sum) against torch's in float64.

    python examples/layers/cross_entropy.py
"""
import numpy as np

import tileprim as tp


def rows64(x, label, ignore_index):
    x64 = x.astype(np.float64)
    m = x64.max(-1, keepdims=True)
    lse = np.log(np.exp(x64 - m).sum(-1)) + m[:, 0]
    picked = np.take_along_axis(x64, np.clip(label, 0, x.shape[1] - 1)[:, None], 1)[:, 0]
    return np.where(label == ignore_index, 0.0, lse - picked)


if __name__ == "__main__":
    rng = np.random.default_rng(3)
    # vocabularies one thread holds need no scope; larger ones take a CTA until the planner picks one
    for vocab, scope in ((1000, None), (32000, tp.cta(256))):
        x = (rng.standard_normal((48, vocab)) * 4).astype(np.float16)
        for dtype in (np.int32, np.int64):
            label = rng.integers(0, vocab, 48).astype(dtype)
            label[::5] = -100  # ignored rows
            got = tp.layers.cross_entropy(x, label[:, None], -100, batch_dims=1, scope=scope, backend="cpu")[:, 0]
            want = rows64(x, label, -100)
            assert got.dtype == np.float32 and np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))
            assert np.all(got[::5] == 0)
        print(f"cross_entropy vocab {vocab}, float16 logits, int32 and int64 labels, ignored rows: ok")
    outside = tp.layers.cross_entropy(x[:2], np.array([[vocab], [-vocab - 1]]), -100, batch_dims=1, scope=scope,
                                      backend="cpu")
    assert np.isnan(outside).all()
    print("a label outside the row gives NaN: ok")
    try:
        import torch
    except ImportError:
        raise SystemExit("(torch not installed: the gradient check is skipped)")
    import tileprim.nn as tpnn
    torch.manual_seed(3)
    logits = torch.randn(10, 50, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 50, (10,))
    target[[1, 7]] = -100
    ours = tpnn.CrossEntropyLoss()(logits, target)
    theirs = torch.nn.functional.cross_entropy(logits, target)
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(torch.autograd.grad(ours, logits)[0], torch.autograd.grad(theirs, logits)[0])
    assert torch.autograd.gradcheck(lambda x: tpnn.CrossEntropyLoss()(x, target), (logits,))
    print("CrossEntropyLoss: the mean over kept rows and its gradient equal torch's (float64), gradcheck: ok")
