"""The kernel cache: compiled kernels in memory, then on disk under
$TILEPRIM_CACHE_DIR, else $XDG_CACHE_HOME/tileprim/<version>, else ~/.cache/tileprim/<version>.
TILEPRIM_CACHE=0 keeps them in memory only. Autotuned scopes (tp.program(autotune=True)) are kept
beside them, in autotune.json."""
from __future__ import annotations

import tileprim._C as _C
from ._platform.backends import cuda_details
from ._calls import autotune

__all__ = ["clear", "directory", "disk_enabled"]


def clear(disk: bool = True) -> None:
    """Forget every compiled kernel of this version and every autotuned choice, on disk too unless
    disk=False."""
    cuda_details()  # configures the cache with this package's version
    _C.cuda.cache_clear(disk)
    autotune.forget(disk)


def directory() -> str:
    cuda_details()
    return _C.cuda.cache_directory()


def disk_enabled() -> bool:
    return _C.cuda.cache_disk_enabled()
