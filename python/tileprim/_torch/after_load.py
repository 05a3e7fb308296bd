"""Code run right after a module loads: tileprim's ops are registered with torch when torch
loads, their compiled twins when torch._dynamo does, so that a first call inside torch.compile
meets them (Dynamo cannot trace a registration); nothing here imports the module itself."""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import warnings

__all__ = ["after_load"]


class _AfterLoad(importlib.abc.MetaPathFinder):
    """Finds ``name`` through the other finders and calls each of ``thens`` once it has loaded:
    tileprim's ops are registered when torch loads, their compiled twins when torch._dynamo does,
    so a first call inside torch.compile meets them (Dynamo cannot trace a registration)."""

    def __init__(self, name: str, then):
        self.name, self.thens, self.finding = name, [then], False

    def find_spec(self, name, path=None, target=None):
        if name != self.name or self.finding:
            return None
        self.finding = True  # the other finders' answer (a find_spec that imports nothing asks too)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.finding = False
        if spec is not None and spec.loader is not None:
            exec_module, thens = spec.loader.exec_module, self.thens

            def exec_then_register(module):
                exec_module(module)
                if self in sys.meta_path:
                    sys.meta_path.remove(self)
                for then in thens:
                    try:
                        then()
                    except Exception as e:  # the module itself loaded: say so, and let the import stand
                        warnings.warn(f"tileprim: registering its ops with {name} failed ({e!r}); torch.compile "
                                      f"and autograd will not see them", RuntimeWarning, stacklevel=2)
            spec.loader.exec_module = exec_then_register
        return spec


def after_load(name: str, then) -> None:
    """then() now where module ``name`` is loaded, else right after it loads."""
    if name in sys.modules:
        then()
        return
    waiting = next((f for f in sys.meta_path if isinstance(f, _AfterLoad) and f.name == name), None)
    if waiting is None:
        sys.meta_path.insert(0, _AfterLoad(name, then))
    elif then not in waiting.thens:
        waiting.thens.append(then)

