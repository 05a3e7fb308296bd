"""The call options of tileprim's torch custom ops. Each op's schema is fixed; what is not a tensor
or the axes travels as ``options``, the name of an entry in a table of call options (scope,
storage, layouts, batch_dims, target, backend, dispatch, dtype, config), interned once per
distinct set of options: the same options give the same string, so a compiled graph holds a
constant and never recompiles per call."""
from __future__ import annotations

import sys
from typing import Dict

from .._calls.scope import scope_of_key

__all__ = ["OPTION_NAMES", "intern_options", "options_name", "options_of", "constant"]

OPTION_NAMES = ("scope", "storage", "layout", "out_layout", "batch_dims", "target", "backend", "dispatch", "extra")
_OPTIONS_BY_KEY: Dict[tuple, str] = {}
_OPTIONS: Dict[str, dict] = {}


def intern_options(scope_key, storage, layout, out_layout, batch_dims, target, backend, dispatch, extra,
                   config) -> str:
    """The options' name in the table: readable, and the same for the same options. The scope comes
    as its key (a constant to torch.compile, where the scope object may be one it made); None:
    named nowhere, the planner's choice for a batched call."""
    key = (scope_of_key(scope_key) if scope_key else None, storage, layout, out_layout, batch_dims, target, backend,
           dispatch, extra, tuple(sorted(config.items())))
    name = _OPTIONS_BY_KEY.get(key)
    if name is None:
        values = dict(zip(OPTION_NAMES, key[:-1]), config=dict(key[-1]))
        name = ";".join(f"{k}={v!r}" for k, v in values.items() if v is not None and v != {})
        if name in _OPTIONS:  # two option sets printing alike: numbered apart
            name = f"{name}#{len(_OPTIONS)}"
        _OPTIONS_BY_KEY[key], _OPTIONS[name] = name, values
    return name


def options_name(options: dict) -> str:
    """The name of ``options`` (a dict of OPTION_NAMES and config) in the table."""
    scope = options["scope"]
    return intern_options(*constant((scope.key if scope is not None else None,
                                     *(options[k] for k in OPTION_NAMES[1:]), options["config"])))


def constant(value):
    """``value`` with its ints, floats and bools made plain: under torch.compile Dynamo traces a
    tile's size, or with dynamic=True a number read off an object (a module's eps, batch_dims kept
    on a settings object), as a symbol, which a function it runs rather than traces
    (``assume_constant_result``) cannot take. What its releases specialise (torch 2.11 to 2.15):
    an int formatted, ``__float__``, a branch; ``int()``/``float()`` keep the symbol, and 2.11
    refuses ``__index__``. (Scopes and programs travel as string keys: 2.11 specialises none of
    these for an int read off some objects.)"""
    torch = sys.modules["torch"]
    if isinstance(value, bool):
        return True if value else False
    if isinstance(value, (int, torch.SymInt)):  # outside Dynamo (AOT autograd's trace) int() specialises it
        return int(f"{value}") if torch.compiler.is_dynamo_compiling() else int(value)
    if isinstance(value, float):
        return value.__float__()
    if isinstance(value, tuple):
        return tuple(constant(v) for v in value)
    if isinstance(value, dict):
        return {k: constant(v) for k, v in value.items()}
    return value


def options_of(name: str) -> dict:
    try:
        return _OPTIONS[name]
    except KeyError:
        raise ValueError(f"options: {name!r} is not a set of call options of this process; tileprim's custom ops "
                         f"take the options tileprim's op functions intern (call tp.<op>, not torch.ops.tileprim)"
                         ) from None
