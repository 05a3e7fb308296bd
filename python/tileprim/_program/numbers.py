"""A number naming each tile program in this process: what a compiled graph's constants can hold
(torch.compile's program op finds the program by it, ``_torch.program_op``)."""
from __future__ import annotations

import itertools
import weakref

__all__ = ["PROGRAMS", "number_program"]

PROGRAMS: "weakref.WeakValueDictionary[int, object]" = weakref.WeakValueDictionary()
_NUMBERS = itertools.count(1)


def number_program(program) -> int:
    number = next(_NUMBERS)
    PROGRAMS[number] = program
    return number
