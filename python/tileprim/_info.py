"""tp.info(): what this installation can do, and why not where it cannot."""
from __future__ import annotations

from . import _C
from ._backends import cuda_status


def info() -> dict:
    usable, reason = cuda_status()
    return {
        "version": __import__("tileprim").__version__,
        "backends": {"cpu": "available", "cuda": "available" if usable else f"unavailable: {reason}"},
        "default_backend": "cuda" if usable else "cpu",
        "ops": {name: family for name, family in _C.ops()},
        "variants": {name: [v[0] for v in _C.variants(name)] for name, _ in _C.ops()},
    }
