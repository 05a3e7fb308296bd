"""A key naming each tile program in this process: what a compiled graph's constants can hold
(torch.compile's program op finds the program by it, ``_torch.program_op``). A string: Dynamo may
trace an int read off an object as a symbol, never a string."""
from __future__ import annotations

import itertools
import weakref

__all__ = ["PROGRAMS", "key_program"]

PROGRAMS: "weakref.WeakValueDictionary[str, object]" = weakref.WeakValueDictionary()
_NUMBERS = itertools.count(1)


def key_program(program) -> str:
    key = f"#{next(_NUMBERS)}"
    PROGRAMS[key] = program
    return key
