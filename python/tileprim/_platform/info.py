"""tp.info(): what this installation can do, and why not where it cannot."""
from __future__ import annotations

import tileprim._C as _C
from .._version import __version__
from .backends import cuda_details, cuda_status, nccl_status


def info() -> dict:
    """What this installation can do: backends (and why CUDA is unavailable), devices, the
    libraries found (NCCL, for treduce across hosts, is loaded here if it was not yet), the
    kernel cache, the ops and their variants.

    Returns
    -------
    dict
        "backends" (cpu, cuda: "available" or why not), the devices, the libraries found, the
        kernel cache, the ops; ``python -m tileprim info`` prints it for a person.

    Examples
    --------
    >>> sorted(tp.info()["backends"])
    ['cpu', 'cuda']
    """
    usable, reason = cuda_status()
    details = cuda_details()
    return {
        "version": __version__,
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


def _library(status: dict, name: str) -> str:
    if status.get("ok"):
        version = status.get("version")
        if isinstance(version, (tuple, list)):
            version = ".".join(str(v) for v in version)
        return f"{name} {version} from {status['path']}" if version else f"{name} from {status['path']}"
    tried = status.get("tried") or []
    looked = f" (looked in: {', '.join(str(t) for t in tried)})" if tried else ""
    return f"{name} not found: {status.get('error') or 'not loaded'}{looked}"


def info_text(details: dict) -> str:
    """tp.info() for a person: one line per question, the lists last."""
    cuda = details["backends"]["cuda"]
    reason = cuda.split(": ", 1)[-1]
    said_below = any(reason == details[lib].get("error") for lib in ("driver", "nvrtc"))
    why = "" if cuda == "available" else (" (no usable CUDA GPU: see below)" if said_below else f" (CUDA {cuda})")
    lines = [f"tileprim {details['version']}", f"default backend: {details['default_backend']}{why}"]
    for d in details["devices"]:
        lines.append(f"GPU: {d['name']}, compute capability {d['cc'] // 10}.{d['cc'] % 10}, {d['sms']} SMs")
    lines.append("driver: " + _library(details["driver"], "libcuda"))
    lines.append("NVRTC: " + _library(details["nvrtc"], "NVRTC") + "  (compiles kernels; no GPU needed)")
    lines.append("NCCL: " + _library(details["nccl"], "NCCL") + "  (treduce across hosts)")
    cache = details["kernel_cache"]
    lines.append(f"kernel cache: {cache['directory']}" + ("" if cache["disk"] else " (disk off: memory only)"))
    families: dict = {}
    for op, family in details["ops"].items():
        families.setdefault(family, []).append(op)
    lines.append("ops:")
    lines += [f"  {family}: {', '.join(ops)}" for family, ops in families.items()]
    lines.append("variants:")
    by_variants: dict = {}
    for op, names in details["variants"].items():
        by_variants.setdefault(tuple(names), []).append(op)
    lines += [f"  {', '.join(names)}: {', '.join(ops)}" for names, ops in by_variants.items()]
    lines.append("python -m tileprim info --json: all of it as JSON")
    return "\n".join(lines)
