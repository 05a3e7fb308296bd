"""tp.info(): what this installation can do, and why not where it cannot."""
from __future__ import annotations

from . import _C
from ._backends import cuda_details, cuda_status


def info() -> dict:
    usable, reason = cuda_status()
    details = cuda_details()
    return {
        "version": __import__("tileprim").__version__,
        "backends": {"cpu": "available", "cuda": "available" if usable else f"unavailable: {reason}"},
        "default_backend": "cuda" if usable else "cpu",
        "devices": details["devices"],
        "driver": details["driver"],
        "nvrtc": details["nvrtc"],
        "kernel_cache": {"directory": _C.cuda.cache_directory(), "disk": _C.cuda.cache_disk_enabled()},
        "ops": {name: family for name, family in _C.ops()},
        "variants": {name: [v[0] for v in _C.variants(name)] for name, _ in _C.ops()},
    }
