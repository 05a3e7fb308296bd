"""A call signature prepared to run, standalone call and tile program alike (a standalone call is
the program of one step): its bound program (``_C.BoundProgram``: the plan and, once it first
runs, the backend's runner), how a call's arguments become the runner's inputs and run-time
scalars, its results, and the ``out=`` checks. One memo holds the prepared signatures of both,
so a repeated call is a dictionary lookup and a run.

A signature's key is what decides its plan: the kind of call (the op and its options, or the
program and its call's), then each argument's kind, dtype, shape and strides or device (a
standalone call's scalar operand by its type: its value is a run-time argument; a program's
Python scalars by value: they are constants of the trace)."""
from __future__ import annotations

import operator
from typing import Callable, Dict, List, Optional

import numpy as np

import tileprim._C as _C
from .._arrays.adapters import Adapter, Unkeyable, adapter_for, placed_key
from .._arrays.dtypes import INDEX_DTYPES, check_index_scalar, dtype_name, numpy_dtype
from .._checks import plain_ndarray, short_repr

__all__ = ["MEMO", "OPERAND_KEYS", "signature", "remember", "forget", "Input", "HostPrepared", "DevicePrepared"]

MEMO: Dict[tuple, object] = {}
_MEMO_LIMIT = 4096
_CONSTANTS = (int, float, bool, np.integer, np.floating)
# How an argument enters a signature, by its type (a dictionary lookup and, where one exists, a
# C-level getter: this runs on every call). A scalar's key is its type. Device array types, NumPy
# scalar types and host tensor types join when first seen.
OPERAND_KEYS: Dict[type, Callable] = {np.ndarray: operator.attrgetter("dtype", "shape", "strides"),
                                      int: type, float: type, bool: type}


def signature(head: tuple, values, constants: bool = False) -> Optional[tuple]:
    """``head`` and every argument's key; with ``constants``, Python scalars by value. None where
    an argument has no key (a type not seen before, an unhashable one): the caller prepares anew."""
    try:
        if constants:  # by repr: -0.0 is not 0.0 (equal as keys), every NaN the same constant
            return (*head, *[(type(x), repr(x)) if isinstance(x, _CONSTANTS) else OPERAND_KEYS[type(x)](x)
                             for x in values])
        return (*head, *[OPERAND_KEYS[type(x)](x) for x in values])
    except (KeyError, TypeError, RuntimeError):  # an unhashable argument; one with no shape (a nested tensor)
        return None


def remember(key: Optional[tuple], prepared) -> None:
    if key is None:
        return
    if len(MEMO) >= _MEMO_LIMIT:
        MEMO.clear()
    MEMO[key] = prepared


# A program's bound plan per traced spec (its steps, tiles, scope, staging, target...): the batch is
# no part of a plan, so a new batch of the same tiles plans nothing again (program.py).
PLANNED: Dict[str, object] = {}


def planned(key: Optional[str], plan):
    """The bound plan remembered for ``key`` (None: not remembered), else ``plan()``'s, kept."""
    if key is None:
        return plan()
    bound = PLANNED.get(key)
    if bound is None:
        if len(PLANNED) >= _MEMO_LIMIT:
            PLANNED.clear()
        bound = PLANNED[key] = plan()
    return bound


def forget() -> None:
    """Drops every remembered call signature and program plan (here and in the C++ plan cache)."""
    MEMO.clear()
    PLANNED.clear()
    _C.plan_cache_clear()


def _out_key(out):
    return tuple(map(placed_key, out)) if type(out) is tuple else placed_key(out)


class Input:
    """One array argument: its position among the call's values and how a run readies it for the
    runner (converted on the host, C-contiguous, broadcast over the batch, or the batch's one tile)."""

    def __init__(self, position: int, convert=None, shape=None, tile_shape=None, shared=False):
        self.position = position
        self.convert = convert        # host: what NumPy makes of it (None: read as it is)
        self.shape = shape            # broadcast to this shape first (None: as it is)
        self.tile_shape, self.shared = tile_shape, shared  # shared: one tile for the whole batch

    def host(self):
        """x -> the array the runner reads, or None where x is read as it is."""
        convert, shape = self.convert, self.shape
        if self.shared:
            tile = self.tile_shape
            return lambda x: np.ascontiguousarray((x if convert is None else convert(x)).reshape(tile))
        if shape is not None:
            return lambda x: np.ascontiguousarray(np.broadcast_to(x if convert is None else convert(x), shape))
        return convert

    def device(self, adapter: Adapter):
        if self.shape is not None and not self.shared:
            shape = self.shape
            return lambda x: adapter.contiguous(adapter.broadcast(x, shape))
        return adapter.contiguous


class _Prepared:
    """What a run needs: the bound program (``core``), the plan users see, the inputs and run-time
    scalars among the call's values, and the results (shape and dtype name each)."""

    def __init__(self, core, plan, arity: int, inputs: List[Input], scalar_at: List[int], results: list,
                 as_tuple: bool, tiles: int, accum: bool = False, names: Optional[list] = None,
                 dropped: tuple = ()):
        self.core, self.plan, self.arity = core, plan, arity
        self.dropped = dropped  # the result shapes from which a whole-tile reduction dropped its tile (1,)
        self.inputs, self.scalar_at, self.results, self.as_tuple = inputs, scalar_at, results, as_tuple
        self.tiles, self.accum = tiles, accum
        self.names = names
        self.positions = [i.position for i in inputs]
        self._outs_checked = set()  # the keys of outs checked before
        # beside index tiles, a run-time scalar must be an integer the dtype holds
        self.index_dtype = results[0][1] if scalar_at and results[0][1] in INDEX_DTYPES else None

    def scalars(self, values) -> list:
        s = []
        for i in self.scalar_at:
            try:
                s.append(float(values[i]))
            except OverflowError:  # an int past float64's range, e.g. 2**1100
                raise ValueError(f"{self.names[i]}: the scalar {short_repr(values[i])} is beyond float64's range "
                                 "(about 1.8e308)") from None
            if self.index_dtype is not None:
                check_index_scalar(values[i], self.index_dtype, self.names[i])
        return s

    def folded_into(self, out):
        """accum: the old values, which out= holds."""
        if out is None:
            raise ValueError("accum: accum=True folds the result into out=, so out= must be given")
        return out

    def checked(self, out) -> None:
        """out= checked against the results once per kind of out (its type, dtype, shape, strides...)."""
        try:
            key = _out_key(out)
        except Unkeyable:
            key = None
        if key is None or key not in self._outs_checked:
            outs = self._outs(out)
            for o, (shape, dtype) in zip(outs, self.results):
                self.check_one(o, shape, dtype)
            if key is not None:
                self._outs_checked.add(key)

    def _outs(self, out) -> tuple:
        n = len(self.results)
        if self.as_tuple and not isinstance(out, tuple):
            raise TypeError(f"out: the program returns a tuple of {n} tiles; pass a tuple of arrays")
        outs = out if self.as_tuple else (out,)
        if len(outs) != n:
            raise ValueError(f"out: the program returns {n} tile(s); out= gives {len(outs)}")
        return outs

    def shape_ok(self, shape, result_shape) -> bool:
        """out's shape: the result's, or with a trailing 1 where a reduction dropped its tile (1,)."""
        shape = tuple(shape)
        return shape == result_shape or (result_shape in self.dropped and shape == result_shape + (1,))

    def returned(self, results):
        return tuple(results) if self.as_tuple else results[0]


class HostPrepared(_Prepared):
    """NumPy arrays, on the CPU backend or through the GPU's staging arena."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ready = [i.host() for i in self.inputs]
        self.np_results = [(shape, numpy_dtype(dtype)) for shape, dtype in self.results]
        # the common case: every value an array read as it is
        self.direct = all(r is None for r in self.ready) and len(self.inputs) == self.arity
        self.ready = [r or _same for r in self.ready]
        if len(self.results) == 1 and not self.as_tuple:
            self.run = self._run_one  # one result: no lists of results made and unpacked
        self.one_in = len(self.inputs) == 1 and not self.scalar_at  # ...and one array in: no lists for _C

    def check_one(self, out, shape, dtype) -> None:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out: expected a NumPy array for NumPy operands, not {type(out).__name__}")
        plain_ndarray(out, "out")
        if dtype_name(out.dtype, "out") != dtype:
            raise TypeError(f"out: dtype {out.dtype} differs from the result's {dtype}")
        if not self.shape_ok(out.shape, shape):
            raise ValueError(f"out: shape {tuple(out.shape)} differs from the result's {shape}")
        if not out.flags.writeable:
            raise ValueError("out: the array is read-only")

    def run(self, values, out):
        if out is not None:
            self.checked(out)
        ready = list(values) if self.direct else [r(values[p]) for r, p in zip(self.ready, self.positions)]
        results = [np.empty(shape, dtype) for shape, dtype in self.np_results]
        if self.accum:
            results[0][...] = self.folded_into(out).reshape(results[0].shape)
        self.core.run_host(ready, self.scalars(values) if self.scalar_at else [], results, self.tiles)
        if out is None:
            return self.returned(results)
        for o, r in zip(out if self.as_tuple else (out,), results):
            o[...] = r.reshape(o.shape)  # only now: a failed run leaves out untouched
        return out

    def _run_one(self, values, out):
        # run spelled out for one result, the most frequent call
        if out is not None:
            self.checked(out)
        shape, dtype = self.np_results[0]
        result = np.empty(shape, dtype)
        if self.accum:
            result[...] = self.folded_into(out).reshape(shape)
        if self.one_in:
            self.core.run_host_one(self.ready[0](values[self.positions[0]]), result, self.tiles)
        else:
            ready = list(values) if self.direct else [r(values[p]) for r, p in zip(self.ready, self.positions)]
            self.core.run_host(ready, self.scalars(values) if self.scalar_at else [], [result], self.tiles)
        if out is None:
            return result
        out[...] = result.reshape(out.shape)  # only now: a failed run leaves out untouched
        return out


def _same(x):
    return x


class DevicePrepared(_Prepared):
    """Device arrays: used in place; the results in the same library, on the same device, ordered
    on that library's current stream."""

    def __init__(self, core, plan, arity, inputs, scalar_at, results, as_tuple, tiles, accum=False, names=None,
                 dropped=(), *, adapter: Adapter, device: int):
        super().__init__(core, plan, arity, inputs, scalar_at, results, as_tuple, tiles, accum, names, dropped)
        a = self.adapter = adapter
        self.device = device
        # what a repeated call does, fixed here: the library's own functions where it has them
        self.ready = [i.device(a) for i in inputs]
        self.pointer, self.result_pointer = a.pointer, a.result_pointer
        self.allocators = [a.allocator(shape, dtype, device) for shape, dtype in results]
        self.stream = a.stream_of(device)
        self.finish = None if type(a).finish is Adapter.finish else a.finish
        if len(inputs) == 1 and len(results) == 1 and not scalar_at and not accum and inputs[0].shape is None:
            self.run = self._run_one  # the most frequent call: one array in, one out

    def check_one(self, out, shape, dtype) -> None:
        a = self.adapter
        if a.library == "jax":
            raise TypeError("out: JAX arrays are immutable; use the returned array")
        if adapter_for(out) is not a:
            raise TypeError(f"out: expected a {a.library} device array like the operands, not {type(out).__name__}")
        a.check_stored(out, "out")
        a.check_written(out, "out")
        if a.contiguous(out) is not out:
            raise ValueError("out: must be C-contiguous; the kernel writes into it")
        if a.dtype(out, "out") != dtype:
            raise TypeError(f"out: dtype {a.dtype(out, 'out')} differs from the result's {dtype}")
        if not self.shape_ok(a.shape(out), shape):
            raise ValueError(f"out: shape {a.shape(out)} differs from the result's {shape}")
        if a.device(out) != self.device:
            raise ValueError(f"out: is on device {a.device(out)}, the operands on device {self.device}")

    def run(self, values, out):
        if out is not None:
            self.checked(out)
        elif self.accum:
            self.folded_into(out)
        held = [r(values[p]) for r, p in zip(self.ready, self.positions)]  # held until the launch
        pointers = list(map(self.pointer, held))
        scalars = self.scalars(values) if self.scalar_at else []
        stream = self.stream()
        if out is not None:
            outs = out if self.as_tuple else (out,)
            self.core.run_device(pointers, scalars, list(map(self.pointer, outs)), self.tiles, self.device, stream)
            return out
        results = [allocate() for allocate in self.allocators]
        self.core.run_device(pointers, scalars, list(map(self.result_pointer, results)), self.tiles, self.device,
                             stream)
        if self.finish is not None:
            results = [self.finish(r, self.device, stream) for r in results]
        return self.returned(results)

    def _run_one(self, values, out):
        # run spelled out for the most frequent call: one array, no lists for _C to convert
        x = self.ready[0](values[self.positions[0]])  # held until the launch: a copy must outlive it
        if out is not None:
            self.checked(out)
            self.core.run_device_one(self.pointer(x), self.pointer(out), self.tiles, self.device, self.stream())
            return out
        result = self.allocators[0]()
        stream = self.stream()
        self.core.run_device_one(self.pointer(x), self.result_pointer(result), self.tiles, self.device, stream)
        return result if self.finish is None else self.finish(result, self.device, stream)
