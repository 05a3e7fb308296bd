"""Docstrings (numpydoc) of the generated op functions, from the op table entry."""
from __future__ import annotations

__all__ = ["op_docstring"]

_COMMON = """out : array, optional
    Written with the result (same library, dtype and shape); left untouched when the call fails.
scope : ExecScope, optional
    Who runs one instance on one tile: tp.thread, tp.warp, tp.warpgroup or tp.cta(n). None
    (named nowhere): a batched call (``batch_dims`` >= 1) runs at the scope the planner chooses
    for the tile and the target (the plan's ``scope_trace`` says why), one tile at tp.thread.
storage : {'local', 'shared', 'shared.dyn'}, optional
    Where the tile is staged: registers (default for thread/warp/warpgroup) or shared
    memory (default for cta).
layout, out_layout : TileLayout, optional
    The tile's layout in that storage (default row-major ``S[shape]``).
batch_dims : int, default 0
    The leading dims index independent tiles, each with its own scope instance.
target : str, optional
    The architecture dispatch models, e.g. 'sm_90a' (default: this GPU's; none on the CPU).
backend : {'cpu', 'cuda'}, optional
    Default cuda when a GPU is usable, else cpu.
dispatch : str, optional
    Force one variant by name."""

_RAISES = """Raises
------
ValueError, TypeError
    Bad arguments, naming the argument and the rule.
tp.DispatchError
    No variant accepts the call; the message is the whole trace table."""

# Runnable examples (doctests in CI), exactly rounded so every backend prints the same.
_EXAMPLES = {
    "sum": ('x = np.arange(8, dtype=np.float32).reshape(2, 4)', 'tp.sum(x, axes=-1)',
            'array([ 6., 22.], dtype=float32)'),
    "max": ('x = np.array([[1, np.nan, 3], [-1, -2, -3]], np.float32)', 'tp.max(x, axes=-1)',
            'array([ 3., -1.], dtype=float32)'),
    "min": ('x = np.array([[1, np.nan, 3], [-1, -2, -3]], np.float32)', 'tp.cta(32).min(x, axes=-1)',
            'array([ 1., -3.], dtype=float32)'),
    "zero": ('x = np.ones(3, np.float32)', 'tp.zero(x)', 'array([0., 0., 0.], dtype=float32)'),
    "fill": ('x = np.ones(3, np.float32)', 'tp.fill(x, 2.5)', 'array([2.5, 2.5, 2.5], dtype=float32)'),
    "reciprocal": ('x = np.array([1, 2, 4], np.float32)', 'tp.reciprocal(x)',
                   'array([1.  , 0.5 , 0.25], dtype=float32)'),
    "sqrt": ('x = np.array([1, 4, 9], np.float32)', 'tp.sqrt(x)', 'array([1., 2., 3.], dtype=float32)'),
    "exp": ('x = np.zeros(2, np.float32)', 'tp.exp(x)', 'array([1., 1.], dtype=float32)'),
    "exp2": ('x = np.array([0, 1, 3], np.float32)', 'tp.exp2(x)', 'array([1., 2., 8.], dtype=float32)'),
    "log2": ('x = np.array([1, 2, 8], np.float32)', 'tp.log2(x)', 'array([0., 1., 3.], dtype=float32)'),
    "log": ('x = np.array([1, 1], np.float32)', 'tp.log(x)', 'array([0., 0.], dtype=float32)'),
    "rsqrt": ('x = np.array([1, 4, 16], np.float32)', 'tp.rsqrt(x)', 'array([1.  , 0.5 , 0.25], dtype=float32)'),
    "silu": ('x = np.zeros(2, np.float32)', 'tp.silu(x)', 'array([0., 0.], dtype=float32)'),
    "add": ('x = np.arange(3, dtype=np.float32)', 'tp.add(x, 1.5)', 'array([1.5, 2.5, 3.5], dtype=float32)'),
    "sub": ('x = np.arange(3, dtype=np.float32)', 'tp.sub(x, x)', 'array([0., 0., 0.], dtype=float32)'),
    "mul": ('x = np.arange(3, dtype=np.float32)', 'tp.mul(x, 2.0)', 'array([0., 2., 4.], dtype=float32)'),
    "fdiv": ('x = np.arange(3, dtype=np.float32)', 'tp.fdiv(x, 4.0)', 'array([0.  , 0.25, 0.5 ], dtype=float32)'),
    "maximum": ('a, b = np.array([1, np.nan], np.float32), np.array([np.nan, 2], np.float32)', 'tp.maximum(a, b)',
                'array([1., 2.], dtype=float32)'),
    "eq": ('a, b = np.array([1, 2, np.nan], np.float32), np.array([1, 3, np.nan], np.float32)', 'tp.eq(a, b)',
           'array([1., 0., 0.], dtype=float32)'),
    "fma": ('x = np.full(2, 2.0, np.float32)', 'tp.fma(x, 3.0, 1.0)', 'array([7., 7.], dtype=float32)'),
    "copy": ('x = np.array([1.5, -0.0], np.float32)', 'tp.copy(x, scope=tp.cta(32), storage="shared", backend="cpu")',
             'array([ 1.5, -0. ], dtype=float32)'),
    "cast": ('x = np.array([1.5, -2.25], np.float32)', 'tp.cast(x, "float16")',
             'array([ 1.5 , -2.25], dtype=float16)'),
    "tanh": ('x = np.array([-1, 0, 2], np.float32)', 'tp.tanh(x)',
             'array([-0.7615942,  0.       ,  0.9640276], dtype=float32)'),
    "erf": ('x = np.array([-1, 0, 2], np.float32)', 'tp.erf(x)',
            'array([-0.8427008,  0.       ,  0.9953223], dtype=float32)'),
    "sigmoid": ('x = np.array([-1, 0, 2], np.float32)', 'tp.sigmoid(x)',
                'array([0.26894143, 0.5       , 0.8807971 ], dtype=float32)'),
    "ne": ('a, b = np.array([1, 2, np.nan], np.float32), np.array([2, 2, np.nan], np.float32)', 'tp.ne(a, b)',
           'array([1., 0., 1.], dtype=float32)'),
    "lt": ('a, b = np.array([1, 2, np.nan], np.float32), np.array([2, 2, np.nan], np.float32)', 'tp.lt(a, b)',
           'array([1., 0., 0.], dtype=float32)'),
    "le": ('a, b = np.array([1, 2, np.nan], np.float32), np.array([2, 2, np.nan], np.float32)', 'tp.le(a, b)',
           'array([1., 1., 0.], dtype=float32)'),
    "gt": ('a, b = np.array([3, 2, np.nan], np.float32), np.array([2, 2, np.nan], np.float32)', 'tp.gt(a, b)',
           'array([1., 0., 0.], dtype=float32)'),
    "ge": ('a, b = np.array([1, 2, np.nan], np.float32), np.array([2, 2, np.nan], np.float32)', 'tp.ge(a, b)',
           'array([0., 1., 0.], dtype=float32)'),
    "where": ('c, a = np.array([1, 0, np.nan], np.float32), np.array([1, 2, np.nan], np.float32)',
              'tp.where(c, a, -1.0)', 'array([ 1., -1., nan], dtype=float32)'),
    "take_along_axis": ('x = np.array([[10, 20, 30], [40, 50, 60]], np.float32)',
                        'tp.take_along_axis(x, np.array([[2, 0], [5, 1]]))',
                        'array([[30., 10.],\n       [nan, 50.]], dtype=float32)'),
    "scatter_add_along_axis": ('x, src = np.zeros((2, 3), np.float32), np.array([[1, 2], [3, 4]], np.float32)',
                               'tp.scatter_add_along_axis(x, np.array([[2, 2], [0, 1]]), src)',
                               'array([[0., 0., 3.],\n       [3., 4., 0.]], dtype=float32)'),
}


def op_docstring(spec: dict) -> str:
    name, family = spec["name"], spec["family"]
    operands = spec["operands"]
    doc = spec["doc"]
    # "the sum over axes" reads as a sentence; "a + b" or "src rounded to dtype" begins with a name,
    # which a capital would change
    first = doc.split(" ", 1)[0]
    opening = doc[0].upper() + doc[1:] if first in ("a", "the", "every") and first not in operands else f"Returns {doc}"
    lines = [f"{opening}, per tile, by the variants of dispatch.", ""]
    lines.append(f"Numerics: NaN rule {spec['nan_rule']}; correctly rounded (one rounding) for "
                 f"{', '.join(spec['exactly_rounded']) or 'no dtype'}; the same bits on the CPU and every "
                 f"GPU for {', '.join(spec['same_bits']) or 'no dtype'}"
                 + (f"; max error in ulps {spec['max_ulp']}." if spec["max_ulp"] else "."))
    if family == "gather":
        lines += ["", "It runs as a tile program of one step (tp.plan gives its ProgramPlan), so its operands keep "
                  "their own shapes and broadcast over the batch as a program's arguments do."]
    lines += ["", "Parameters", "----------"]
    for o in operands:
        if name == "fill" and o == "value":
            lines += [f"{o} : float", "    The value every element gets."]
        elif family == "gather":
            lines += [f"{o} : array", {"x": "    The tile indexed (float16 to float64)"
                                             + ("; only its shape is read." if name != "take_along_axis" else "."),
                                       "idx": "    int32 or int64 positions along ``axis`` (negative ones count from "
                                              "the end), x's shape in every other dim.",
                                       "src": "    The values added, idx's shape and x's dtype."}[o]]
        elif family == "reduction" or name in ("zero", "fill", "cast", "copy"):
            lines += [f"{o} : array", "    NumPy, or a PyTorch / CuPy / JAX device array"
                      + (" (only its shape is read)." if name in ("zero", "fill") else ".")]
        else:
            lines += [f"{o} : array or scalar", "    NumPy or device arrays (NumPy broadcasting), or Python scalars."]
    if spec["extra_arg"] == "dtype":
        lines += ["dtype : str or dtype", "    'float16', 'bfloat16', 'float32' or 'float64'."]
    if family == "gather":
        lines += ["axis : int, default -1", "    The tile dim indexed (counted within the tile)."]
    if family == "reduction":
        lines += ["axes : int or tuple of int, default -1", "    The tile dims to reduce (counted within the tile).",
                  "accum : bool, default False", "    Fold the result into ``out``'s old values.",
                  "keepdims : bool, default False", "    Keep each reduced dim with length 1 (NumPy's keepdims)."]
    if "fastmath" in spec["options"]:
        fast = spec["fastmath"]
        lines += ["fastmath : bool, optional",
                  "    True: on the GPU, " + (f"the hardware's approximation ({fast['form']}), its error in "
                                             "``tp.op_table()[op]['fastmath']``" if fast else
                                             "nothing to approximate: as False")
                  + "; the CPU backend runs the exact function. None: False (in a tile program: the program's)."]
    lines += _COMMON.splitlines()
    options = [o for o in spec["options"] if o != "fastmath"]
    if options:
        lines += ["**config : bool", f"    Variant options: {', '.join(options)}."]
    lines += ["", "Returns", "-------", "array",
              "    The result in the operands' library and device (NumPy in, NumPy out).", ""]
    lines += _RAISES.splitlines()
    if name in _EXAMPLES:
        setup, call, result = _EXAMPLES[name]
        lines += ["", "Examples", "--------", f">>> {setup}", f">>> {call}", result]
    return "\n".join(lines) + "\n"
