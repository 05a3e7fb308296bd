"""The op table by name, at the bottom of the package: each op's spec from C++ (``SPECS``) and the
function ``_ops.public`` makes of it (``OPS``, filled as tileprim loads). What calls an op from beneath
``_ops.public`` looks its function up here when it runs: a scope's methods, a tile's arithmetic while a
program is traced, JAX's host callback, torch's custom op and its backward."""
from __future__ import annotations

from typing import Callable, Dict

import tileprim._C as _C

__all__ = ["SPECS", "OPS"]

SPECS: Dict[str, dict] = {spec["name"]: spec for spec in _C.ops()}
OPS: Dict[str, Callable] = {}  # op name -> tp.<op>, every op but the collectives
