"""A layout as a value: ``TileLayout`` (where each element of a tile lives), with its parts
(``Iter``, ``Swizzle``) and what it answers (``Position``, ``PositionSet``, ``DimInfo``). Equal
layouts compare and hash alike, in C++ (``csrc/layout``), so a layout is a key of the call memo.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple, Union

import tileprim._C as _C
from .syntax import THREAD_WEIGHT, Iter, LayoutExpr, as_tuple, axis_rank, layout_int, row_major

__all__ = ["TileLayout", "Swizzle", "Position", "PositionSet", "DimInfo", "as_layout", "spelled_layout"]


@dataclass(frozen=True)
class Swizzle:
    """Address swizzle of shared tiles: ``addr -> f(addr >> M) << M | low M bits``,
    ``f(x) = x ^ ((x & ((2**B - 1) << S)) >> S)`` (M = per_element, B = swizzle_len, S = atom_len).

    Raises
    ------
    ValueError
        Negative parts, ``atom_len < swizzle_len``, or M + B + S > 32.

    Examples
    --------
    >>> L = TileLayout(S[(8, 32) : (32, 1)], swizzle=tp.Swizzle(2, 3, 3))
    >>> L.apply((1, 0))     # row 1 starts 4 elements (16 bytes) further on
    {'m': 36}
    >>> tp.Swizzle.for_bytes(128, np.float32)
    Swizzle(per_element=2, swizzle_len=3, atom_len=3)
    """
    per_element: int
    swizzle_len: int
    atom_len: int = 3

    def __post_init__(self):
        for name in ("per_element", "swizzle_len", "atom_len"):
            object.__setattr__(self, name, layout_int(getattr(self, name), f"swizzle {name}"))
        _C.check_swizzle(self.per_element, self.swizzle_len, self.atom_len)

    @classmethod
    def for_bytes(cls, swizzle_bytes: int, dtype) -> "Swizzle":
        """The 32/64/128-byte swizzles of TMA and wgmma for elements of ``dtype``."""
        import numpy as np
        bits = np.dtype(dtype).itemsize * 8
        lens = {32: 1, 64: 2, 128: 3}
        if swizzle_bytes not in lens:
            raise ValueError(f"swizzle_bytes: {swizzle_bytes} is not 32, 64 or 128")
        return cls((128 // bits).bit_length() - 1, lens[swizzle_bytes], 3)


class Position(dict):
    """Coordinates of one place holding an element: ``{'m': 5, 'laneid': 3}``, axes in the
    canonical order (m, laneid, warpid, tx, wgid, tid_in_wg, wid_in_wg). Hashable, so the places
    of a replicated element form a set."""

    def __init__(self, coords=(), **kw):
        super().__init__(sorted(dict(coords, **kw).items(), key=lambda kv: axis_rank(kv[0])))

    @property
    def thread(self) -> int:
        """The index of the thread holding this place within its scope instance."""
        return sum(v * THREAD_WEIGHT[a] for a, v in self.items() if a != "m")

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __setitem__(self, k, v):
        raise TypeError("Position is read-only")


class PositionSet(frozenset):
    """The places of a replicated element; its repr lists them in numeric order (by thread
    index, then m, then the coordinates in axis order)."""

    def __repr__(self) -> str:
        def key(p):
            return (p.thread, p.get("m", 0), tuple(p.values()))
        return "{" + ", ".join(repr(p) for p in sorted(self, key=key)) + "}"


@dataclass(frozen=True)
class DimInfo:
    """The iters one logical dim owns; thread_extent threads share it, local_extent per thread."""
    iters: Tuple[Iter, ...]
    thread_extent: int
    local_extent: int


class TileLayout:
    """Where each element of a tile lives: shard iters place it, replica iters copy it, an
    offset shifts it.

    For a logical flat index x the shard digits are c_k = (x / prod_{l>k} e_l) mod e_k and the
    element's places are { sum_k c_k s_k @ axis_k + r + offset | r in the replica }, the memory
    coordinate ``m`` then swizzled. On register tiles ``m`` is a register of the thread the thread
    axes name; on shared tiles it is the element's offset.

    Parameters
    ----------
    layout : S[...] (+ R[...] + offsets), or a TileLayout
        ``S[extents : strides]`` is the shard, ``R[...]`` a replica, ``v @ axis`` a stride or
        offset on a named axis (``m``, ``laneid``, ``warpid``, ``tx``, ``wgid``, ``tid_in_wg``,
        ``wid_in_wg``; a bare number is on ``m``), ``S[8, 4]`` extents only (row-major on m).
    swizzle : Swizzle, optional
        The shared-memory address swizzle.

    Raises
    ------
    ValueError
        A part that breaks a rule: extents below 1, negative strides or offsets, numbers or a
        span beyond 64 bits, a bad swizzle.

    Examples
    --------
    >>> L = TileLayout(S[(32, 8) : (1 @ laneid, 1)])     # lane i holds row i in 8 registers
    >>> L.apply((3, 5))
    {'m': 5, 'laneid': 3}
    >>> L.storage(), L.size, L.span
    (TileLayout(S[8 : 1]), 256, 8)
    """

    def __init__(self, layout: Union[LayoutExpr, "TileLayout"], *, swizzle: Optional[Swizzle] = None):
        if isinstance(layout, TileLayout):
            core = layout._core
            if swizzle is not None:
                core = _C.TileLayoutCore(core.shard, core.replica, core.offset, _swizzle_tuple(swizzle))
            self._core = core
            return
        if not isinstance(layout, LayoutExpr) or layout.shard is None:
            raise TypeError(f"layout: TileLayout takes S[...] (+ R[...] + offsets), not {layout!r}")
        offset = {axis: layout_int(v, f"offset on {axis}") for axis, v in layout.offset.items()}
        self._core = _C.TileLayoutCore(layout.shard, layout.replica, offset, _swizzle_tuple(swizzle))

    @classmethod
    def from_iters(cls, shard: Iterable[Iter], replica: Iterable[Iter] = (),
                   offset: Optional[Dict[str, int]] = None, swizzle: Optional[Swizzle] = None) -> "TileLayout":
        """A layout from its parts: Iter(extent, stride, axis) lists and an offset per axis.

        Examples
        --------
        >>> TileLayout.from_iters([tp.Iter(4, 8), tp.Iter(8, 1)])
        TileLayout(S[(4, 8) : (8, 1)])
        """
        shard, replica = list(shard), list(replica)
        for it in shard + replica:
            if not isinstance(it, Iter):
                raise TypeError(f"layout: from_iters takes tp.Iter(extent, stride, axis) values, not {it!r}")
        return cls(LayoutExpr(shard, replica, offset or {}), swizzle=swizzle)

    @classmethod
    def row_major(cls, shape) -> "TileLayout":
        """The row-major memory layout of ``shape``: the default of every tile.

        Examples
        --------
        >>> TileLayout.row_major((4, 8))
        TileLayout(S[(4, 8) : (8, 1)])
        """
        return cls._wrap(row_major(shape))

    @classmethod
    def _wrap(cls, core) -> "TileLayout":
        obj = cls.__new__(cls)
        obj._core = core
        return obj

    # ---- parts ----------------------------------------------------------------------------
    @property
    def shard(self) -> List[Iter]:
        return list(self._core.shard)

    @property
    def replica(self) -> List[Iter]:
        return list(self._core.replica)

    @property
    def offset(self) -> Dict[str, int]:
        return {k: v for k, v in self._core.offset.items() if v}

    @property
    def swizzle(self) -> Optional[Swizzle]:
        s = self._core.swizzle
        return Swizzle(*s) if s[1] else None

    @property
    def size(self) -> int:
        """Elements the shard places."""
        return self._core.size

    @property
    def elements(self) -> int:
        """Elements it places: ``size`` unless padded (the planner's layout of a tile its scope's
        threads do not divide, shown ``padded(n)``: the positions past the first n hold nothing)."""
        return self._core.elements

    @property
    def shape(self) -> Tuple[int, ...]:
        """The shard's extents: the shape this layout was written for."""
        return tuple(self._core.shape)

    @property
    def span(self) -> int:
        """Memory slots (registers per thread, or shared elements) the layout needs."""
        return self._core.span

    @property
    def thread_axes(self) -> Tuple[str, ...]:
        return tuple(self._core.thread_axes)

    def storage(self) -> "TileLayout":
        """One thread's view: the layout without its thread iters and thread offsets.

        Examples
        --------
        >>> TileLayout(S[(32, 8) : (1 @ laneid, 1)]).storage()
        TileLayout(S[8 : 1])
        """
        return TileLayout._wrap(self._core.storage())

    # ---- evaluation -----------------------------------------------------------------------
    def apply(self, index, shape=None):
        """The place(s) holding the element at ``index``.

        Parameters
        ----------
        index : int or tuple of int
            A flat index, or coordinates over ``shape``.
        shape : tuple of int, optional
            The tile's logical shape (default: this layout's shard extents).

        Returns
        -------
        Position or PositionSet
            A place (``{'m': register or offset, <thread axis>: coordinate}``), or every place of
            a replicated element, printed in numeric order.

        Raises
        ------
        ValueError
            An index outside the layout, or more than 2**16 places for one element.

        Examples
        --------
        >>> TileLayout(S[(32, 8) : (1 @ laneid, 1)]).apply(29)
        {'m': 5, 'laneid': 3}
        >>> len(TileLayout(S[8 : 1] + R[32 : 1 @ laneid]).apply(3))
        32
        """
        flat = self._flat(index, shape)
        places = [Position(p) for p in self._core.positions(flat)]
        return places[0] if not self._core.replica else PositionSet(places)

    def _flat(self, index, shape) -> int:
        if isinstance(index, (tuple, list)):
            shape = tuple(layout_int(d, "shape dim") for d in shape) if shape is not None else self.shape
            if len(index) != len(shape):
                raise ValueError(f"index: {tuple(index)} has {len(index)} coordinates for shape {shape}")
            flat = 0
            for i, d in zip(index, shape):
                i = layout_int(i, "index")
                if not 0 <= i < d:
                    raise ValueError(f"index: {tuple(index)} is outside shape {shape}")
                flat = flat * d + i
            index = flat
        return layout_int(index, "index")  # the core checks it against the layout's size

    def dims(self, shape=None) -> List[DimInfo]:
        """The iters each logical dim of ``shape`` owns, with its thread and local extents.

        Raises
        ------
        ValueError
            When the layout does not split into the dims of ``shape``.

        Examples
        --------
        >>> [(d.thread_extent, d.local_extent) for d in TileLayout(S[(32, 8) : (1 @ laneid, 1)]).dims()]
        [(32, 1), (1, 8)]
        """
        shape = list(self.shape) if shape is None else [layout_int(d, "shape dim") for d in as_tuple(shape)]
        return [DimInfo(tuple(d.iters), d.thread_extent, d.local_extent) for d in self._core.group(shape)]

    def thread_extents(self, shape=None) -> Tuple[int, ...]:
        """Threads sharing each dim of ``shape``.

        Examples
        --------
        >>> TileLayout(S[(32, 8) : (1 @ laneid, 1)]).thread_extents()
        (32, 1)
        """
        return tuple(d.thread_extent for d in self.dims(shape))

    def local_extents(self, shape=None) -> Tuple[int, ...]:
        """Elements of each dim of ``shape`` one thread holds.

        Examples
        --------
        >>> TileLayout(S[(32, 8) : (1 @ laneid, 1)]).local_extents()
        (1, 8)
        """
        return tuple(d.local_extent for d in self.dims(shape))

    # ---- pictures (tileprim._viz) -----------------------------------------------------------
    def draw(self, shape=None, path=None, *, dtype=None, labels=None) -> str:
        """The tile as an SVG grid: each cell coloured by the thread holding it and labelled with
        thread and register (shared layouts: coloured by 4-byte bank, labelled with offset and
        bank, swizzle included, bank conflicts marked); written to ``path`` when given. In
        Jupyter a TileLayout shows this picture.

        Parameters
        ----------
        shape : tuple of int, optional
            The logical shape to draw (default: the layout's own); same number of elements.
        path : str, optional
            Where to write the SVG.
        dtype : str or dtype, optional
            The element type that sets shared-memory banks (default float32).
        labels : bool, optional
            True keeps the text in every cell of a large tile, False draws colour only;
            default: text up to 1024 cells.

        Returns
        -------
        str
            The SVG.

        Examples
        --------
        >>> svg = TileLayout(S[(32, 8) : (1 @ laneid, 1)]).draw()
        >>> svg.startswith("<svg")
        True
        """
        from .._viz.layout_grid import layout_svg
        svg = layout_svg(self, shape, dtype, labels)
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(svg)
        return svg

    def _repr_svg_(self) -> str:
        from .._viz.layout_grid import layout_svg
        return layout_svg(self)

    def _repr_html_(self) -> str:
        from .._viz.layout_grid import layout_html
        return layout_html(self)

    # ---- value semantics ------------------------------------------------------------------
    def __eq__(self, other) -> bool:
        if isinstance(other, LayoutExpr):
            other = TileLayout(other)
        return isinstance(other, TileLayout) and self._core == other._core

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            self._hash = hash(self._core)  # by value, in C++: equal layouts hash alike
            return self._hash

    def __str__(self) -> str:
        return str(self._core)

    def __repr__(self) -> str:  # code that makes it again, given tp's names (S, R, laneid, tp.Swizzle)
        core, swizzle = self._core, self.swizzle
        if swizzle is None:
            return f"TileLayout({self})"
        plain = _C.TileLayoutCore(core.shard, core.replica, core.offset, (0, 0, 0))
        return (f"TileLayout({plain}, swizzle=tp.Swizzle({swizzle.per_element}, {swizzle.swizzle_len}, "
                f"{swizzle.atom_len}))")

    def __reduce__(self):  # a value: pickled and copied as its core's parts
        core = self._core
        return (_from_parts, (list(core.shard), list(core.replica), dict(core.offset), tuple(core.swizzle)))


def _from_parts(shard, replica, offset, swizzle) -> TileLayout:
    return TileLayout._wrap(_C.TileLayoutCore(shard, replica, offset, swizzle))


def _swizzle_tuple(s) -> Tuple[int, int, int]:
    if s is None:
        return (0, 0, 0)
    if isinstance(s, tuple):
        s = Swizzle(*s)
    if not isinstance(s, Swizzle):
        raise TypeError(f"swizzle: expected a tp.Swizzle, not {s!r}")
    return (s.per_element, s.swizzle_len, s.atom_len)


def as_layout(value, arg: str) -> Optional[TileLayout]:
    """``layout=`` / ``out_layout=`` as given by a caller: None, a TileLayout or S[...] syntax."""
    if value is None or isinstance(value, TileLayout):
        return value
    if isinstance(value, LayoutExpr):
        return spelled_layout(value)
    raise TypeError(f"{arg}: expected a TileLayout or S[...] syntax, not {type(value).__name__}")


def spelled_layout(expr: LayoutExpr) -> TileLayout:
    """The TileLayout an S[...] expression spells, made once and kept on the expression (which is
    never changed: ``+`` makes a new one), so S[...] written inline in a repeated call gives the same
    layout and hits the call memo."""
    layout = expr.__dict__.get("_tile_layout")
    if layout is None:
        # the core the expression keeps; TileLayout's own error for a part with no shard S[...]
        layout = expr._tile_layout = TileLayout._wrap(expr._value()) if expr.shard is not None else TileLayout(expr)
    return layout
