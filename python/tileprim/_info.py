"""tp.info(): what this installation can do, and why not where it cannot."""
from __future__ import annotations

from . import _C
from ._backends import cuda_details, cuda_status, nccl_status


def info() -> dict:
    """What this installation can do: backends (and why CUDA is unavailable), devices, the
    libraries found (NCCL, for treduce across hosts, is loaded here if it was not yet), the
    kernel cache, the ops and their variants.

    Examples
    --------
    >>> sorted(tp.info()["backends"])
    ['cpu', 'cuda']
    """
    usable, reason = cuda_status()
    details = cuda_details()
    return {
        "version": __import__("tileprim").__version__,
        "backends": {"cpu": "available", "cuda": "available" if usable else f"unavailable: {reason}"},
        "default_backend": "cuda" if usable else "cpu",
        "devices": details["devices"],
        "driver": details["driver"],
        "nvrtc": details["nvrtc"],
        "nccl": nccl_status(),
        "kernel_cache": {"directory": _C.cuda.cache_directory(), "disk": _C.cuda.cache_disk_enabled()},
        "ops": {op["name"]: op["family"] for op in _C.ops()},
        "variants": {op["name"]: [v[0] for v in _C.variants(op["name"])] for op in _C.ops()},
    }
