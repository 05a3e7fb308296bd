"""Layouts written as text, ``"S[(32, 8) : (1@laneid, 1)] + R[4:1@warpid]"``, read without
``eval``: an ``ast`` walker that knows only the layout syntax (``S[...]``, ``R[...]``, integers,
tuples, ``value @ axis``, ``+``, slices) and rejects everything else, saying what it found."""
from __future__ import annotations

import ast

from . import syntax
from .value import TileLayout

__all__ = ["parse_layout", "LayoutTextError"]

_NAMES = {"S": syntax.S, "R": syntax.R, "m": syntax.m, "laneid": syntax.laneid, "warpid": syntax.warpid,
          "tx": syntax.tx, "wgid": syntax.wgid, "tid_in_wg": syntax.tid_in_wg, "wid_in_wg": syntax.wid_in_wg}
_SYNTAX = "S[...], R[...], integers, tuples, value @ axis and +"


class LayoutTextError(ValueError):
    """The text is not the layout syntax (or names a layout the algebra rejects)."""


def _reject(node: ast.AST, what: str) -> LayoutTextError:
    return LayoutTextError(f"{what} at column {getattr(node, 'col_offset', 0) + 1} is not layout syntax; "
                           f"only {_SYNTAX} are allowed")


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        return "a function call"
    if isinstance(node, ast.Attribute):
        return f"an attribute (.{node.attr})"
    if isinstance(node, ast.Constant):
        return f"the constant {node.value!r}"
    if isinstance(node, ast.BinOp):
        return f"the operator {type(node.op).__name__}"
    return f"a {type(node).__name__} expression"


def _walk(node: ast.AST):
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _walk(node.operand)
        if type(value) is not int:
            raise _reject(node, "a minus sign before something other than an integer")
        return -value
    if isinstance(node, ast.Name):
        if node.id not in _NAMES:
            raise _reject(node, f"the name {node.id!r} (known: {', '.join(_NAMES)})")
        return _NAMES[node.id]
    if isinstance(node, ast.Tuple):
        return tuple(_walk(e) for e in node.elts)
    if isinstance(node, ast.Slice):
        if node.step is not None or node.lower is None or node.upper is None:
            raise _reject(node, "a slice other than extents : strides")
        return slice(_walk(node.lower), _walk(node.upper))
    if isinstance(node, ast.Subscript):
        if not (isinstance(node.value, ast.Name) and node.value.id in ("S", "R")):
            raise _reject(node, "indexing something other than S or R")
        return _NAMES[node.value.id][_walk(node.slice)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.MatMult)):
        left, right = _walk(node.left), _walk(node.right)
        return left + right if isinstance(node.op, ast.Add) else left @ right
    raise _reject(node, _describe(node))


def parse_layout(text: str) -> TileLayout:
    """The TileLayout that ``text`` spells in the layout syntax."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise LayoutTextError(f"not a layout expression ({e.msg} at column {e.offset})") from None
    except (ValueError, RecursionError, MemoryError) as e:   # over-long literals, absurd nesting
        raise LayoutTextError(f"not a layout expression ({type(e).__name__}: {e})") from None
    try:
        return TileLayout(_walk(tree.body))
    except LayoutTextError:
        raise
    except RecursionError:
        raise LayoutTextError("not a layout expression (nested too deeply)") from None
    except (TypeError, ValueError) as e:
        raise LayoutTextError(str(e)) from None
