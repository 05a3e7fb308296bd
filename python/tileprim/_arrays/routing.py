"""The routing table: what the call path asks of an array library it never imports. Each library's
adapter module (``_torch``, ``_jax``, ``_arrays.cupy``) registers an ``ArrayLibrary`` under the
top-level module of its array types; an argument finds its library by its type's module, so
``import tileprim`` imports no array library, and a library's arrays exist only once it is loaded.

The call path asks, where a call signature is first prepared: ``device_adapter`` (arrays used in
place on a GPU), ``on_host`` (host arrays read through NumPy views), ``route_call`` (a call taken by
the library's own machinery: torch's custom op under autograd, JAX's host callback inside
``jit``); on every call of a tile program: ``route_program`` (torch.compile and autograd);
before a collective: ``refuse_gradient``; before tp.plan of a tile program: ``refuse_plan``;
``stop_gradient`` for tp.stop_gradient on an array; and ``keeps_shapes`` and ``flat_tiles`` where a
program of maps alone takes its rows as tiles of a few elements (``_program.map_tiles``)."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import numpy as np

__all__ = ["ArrayLibrary", "UNROUTED", "PROGRAM_ROUTES", "register", "library_of", "route_call", "on_host",
           "host_views", "refuse_gradients", "refuse_plans", "keeps_shapes", "flat_tiles"]

UNROUTED = object()  # route_program's answer where the library leaves the call to tileprim


class ArrayLibrary:
    """One array library as the call path meets it; every answer here: nothing of its own."""

    def device_adapter(self, x):
        """The adapter (``_arrays.adapters.Adapter``) of a device array of this library, else None."""
        return None

    def is_host_array(self, x) -> bool:
        """True for an array read on the host through a NumPy view (``on_host``)."""
        return False

    def on_host(self, values, prepare: Callable):
        """The call on ``values``, some of them this library's host arrays, prepared by
        ``prepare(views)`` on NumPy views of them and returning the library's arrays."""
        raise NotImplementedError

    def host_views(self, values) -> list:
        """NumPy views of this library's host arrays among ``values`` (their memory: a result
        written into one lands in it), the other values as they are."""
        raise NotImplementedError

    def from_host_view(self, result):
        """A NumPy result made on the views, as this library's host array sharing its memory."""
        raise NotImplementedError

    def route_call(self, values, out, call: dict, prepare: Callable):
        """None, or (prepared, memo) where the library takes this standalone call: ``call`` holds
        op, axes, accum, keepdims and options; ``prepare()`` makes tileprim's own prepared call;
        memo: whether the call's memo may keep the answer for the signature."""
        return None

    def route_program(self, program, args, out, batch_dims, scope, backend, target, fastmath):
        """The result where the library takes this call of a tile program (its arguments and
        options as the call gave them), else UNROUTED. Asked on every call, whatever the
        arguments: inside torch.compile a call is routed before any tensor is looked at."""
        return UNROUTED

    def refuse_gradient(self, what: str, values) -> None:
        """TypeError where one of ``values`` needs a gradient that ``what`` has none for."""

    def refuse_plan(self, what: str, values) -> None:
        """TypeError where ``values`` cannot be planned on (stand-ins with no concrete data)."""

    def stop_gradient(self, x):
        """x, through which the library's autograd passes no gradient (tp.stop_gradient)."""
        return x

    def keeps_shapes(self, x) -> bool:
        """True where the library's own machinery traces or transforms x now, so that a call keeps
        the shapes it was given (its graph sees them)."""
        return False

    def flat_tiles(self, x, tile: int):
        """x's elements in order as rows of ``tile`` (``x.reshape(-1, tile)``) where that is a view of
        its memory, else None."""
        return None


_LIBRARIES: Dict[str, ArrayLibrary] = {}  # by the top-level module of the library's array types
# the route_program of each library that has one: a tile program's every call asks them in turn
# (spelled out there, as a call frame costs 0.2 us), none where no such library is loaded
PROGRAM_ROUTES: List[Callable] = []


def register(modules, library: ArrayLibrary) -> None:
    """``library`` answers for the arrays whose type's top-level module is one of ``modules``."""
    for module in modules:
        _LIBRARIES[module] = library
    answers = type(library).route_program is not ArrayLibrary.route_program
    if answers and library.route_program not in PROGRAM_ROUTES:
        PROGRAM_ROUTES.append(library.route_program)


def library_of(x) -> Optional[ArrayLibrary]:
    """The library of x's type (or of a base class: a subclass defined elsewhere), else None."""
    cls = type(x)
    library = _LIBRARIES.get(cls.__module__.partition(".")[0])
    if library is None:
        for base in cls.__mro__[1:-1]:
            library = _LIBRARIES.get(base.__module__.partition(".")[0])
            if library is not None:
                break
    return library


def _libraries(values) -> List[ArrayLibrary]:
    found = []
    for x in values:
        library = library_of(x)
        if library is not None and library not in found:
            found.append(library)
    return found


def route_call(values, out, call: dict, prepare: Callable):
    """(prepared, memo) from the first library of the operands that takes the call, else None."""
    for library in _libraries(values):
        routed = library.route_call(values, out, call, prepare)
        if routed is not None:
            return routed
    return None


def on_host(values, prepare: Callable):
    """The call prepared on NumPy views where an operand is a library's host array, else None."""
    for library in _libraries(values):
        if any(map(library.is_host_array, values)):
            return library.on_host(values, prepare)
    return None


def host_views(values):
    """(views, library) where a value is a library's host array (``ArrayLibrary.host_views``),
    else None: a call that takes NumPy arrays only (treduce) runs on the views."""
    for library in _libraries(values):
        if any(map(library.is_host_array, values)):
            return library.host_views(values), library
    return None


def refuse_gradients(what: str, values) -> None:
    for library in _libraries(values):
        library.refuse_gradient(what, values)


def refuse_plans(what: str, values) -> None:
    for library in _libraries(values):
        library.refuse_plan(what, values)


def keeps_shapes(x) -> bool:
    """Whether x's library traces or transforms it now (``ArrayLibrary.keeps_shapes``)."""
    if isinstance(x, np.ndarray):
        return False
    library = library_of(x)
    return library is not None and library.keeps_shapes(x)


def flat_tiles(x, tile: int):
    """x as rows of ``tile`` elements, a view of its memory (``ArrayLibrary.flat_tiles``; a NumPy
    array's where it is C-contiguous), else None."""
    if isinstance(x, np.ndarray):
        return x.reshape(-1, tile) if x.flags.c_contiguous else None
    library = library_of(x)
    return None if library is None else library.flat_tiles(x, tile)
