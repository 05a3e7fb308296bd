"""Without a GPU: every variant's generated kernel compiles with NVRTC for sm_90a and sm_100a, and
its PTX holds the instructions the seeds name."""
import re

import ml_dtypes
import numpy as np
import pytest

import tileprim as tp
from tileprim import R, S, Swizzle, TileLayout, laneid, tid_in_wg, tx, wid_in_wg

pytestmark = pytest.mark.skipif(not tp.info()["nvrtc"]["ok"], reason="NVRTC is not available")

ARCHS = ["sm_90a", "sm_100a"]


BF16 = ml_dtypes.bfloat16


def f(dtype, *shape):
    return np.ones(shape, dtype)


# (id, op function, args, kwargs) covering every variant, path, dtype and storage
CASES = [
    ("local-thread", tp.sum, (f("f4", 7),), {}),
    ("local-thread-2d-accum", tp.min, (f("f8", 3, 4, 5),), dict(axes=(0, 2), out=f("f8", 4), accum=True)),
    ("local-warp-replica", tp.warp.sum, (f("f4", 32, 8),), dict(axes=0, layout=S[(32, 8):(1 @ laneid, 1)])),
    ("local-warp-groups-f16", tp.warp.max, (f("f2", 8, 4, 3),),
     dict(axes=(1, 2), layout=S[(8, 4, 3):(4 @ laneid, 1 @ laneid, 1)])),
    ("local-warp-view-tr", tp.warp.sum, (f("f4", 32, 8),),
     dict(axes=0, layout=S[(32, 8):(1 @ laneid, 1)], out_layout=S[(32, 8):(1 @ laneid, 1)], thread_reduce=True)),
    ("local-wg-bf16", tp.warpgroup.sum, (f(BF16, 4, 32, 3),),
     dict(axes=(1, 2), layout=S[(4, 32, 3):(1 @ wid_in_wg, 1 @ laneid, 1)])),
    ("local-wg-rows", tp.warpgroup.min, (f("f4", 128, 16),), dict(axes=1, layout=S[(128, 16):(1 @ tid_in_wg, 1)])),
    ("shared-cta32", tp.cta(32).sum, (f("f4", 4, 8),), dict(storage="shared")),
    ("shared-cta48-f16", tp.cta(48).max, (f("f2", 3, 100),), dict(storage="shared")),
    ("shared-cta1000-f8", tp.cta(1000).sum, (f("f8", 3, 5),), dict(storage="shared.dyn")),
    ("shared-warp", tp.warp.min, (f("f4", 4, 8),), dict(storage="shared")),
    ("shared-wg", tp.warpgroup.sum, (f("f4", 6, 33),), dict(storage="shared")),
    ("shared-thread", tp.sum, (f("f4", 4, 8),), dict(storage="shared", axes=0)),
    ("shared-swizzled", tp.cta(64).sum, (f("f4", 8, 64),),
     dict(storage="shared", layout=TileLayout(S[(8, 64):(64, 1)], swizzle=Swizzle(2, 3, 3)))),
    ("packed-sum", tp.sum, (f("f4", 37),), {}),
    ("packed-max", tp.max, (f("f4", 37),), {}),
    ("packed-min-nan", tp.min, (f("f4", 64),), dict(propagate_nan=True)),
    ("reg-sqrt", tp.warp.sqrt, (f("f4", 32, 8),), dict(layout=S[(32, 8):(1 @ laneid, 1)])),
    ("reg-exp-f16", tp.warpgroup.exp, (f("f2", 128, 2),), dict(layout=S[(128, 2):(1 @ tid_in_wg, 1)])),
    ("reg-silu-bf16", tp.silu, (f(BF16, 5),), {}),
    ("reg-fma-scalar", tp.warp.fma, (f("f4", 32, 8), 2.0, f("f4", 32, 8)), dict(layout=S[(32, 8):(1 @ laneid, 1)])),
    ("reg-maximum-nan", tp.cta(64).maximum, (f("f8", 64, 2), f("f8", 64, 2)),
     dict(layout=S[(64, 2):(1 @ tx, 1)], propagate_nan=True)),
    ("reg-cast", tp.cast, (f("f4", 5, 3), "bfloat16"), {}),
    ("reg-fill", tp.warp.fill, (f("f4", 8), 3.5), dict(layout=S[8:1] + R[32:1 @ laneid])),
    ("reg-zero", tp.zero, (f("f2", 9),), {}),
]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_variant_compiles(case, arch):
    name, fn, args, kwargs = case
    k = tp.lower(fn, *args, target=arch, **kwargs)
    assert k.arch == arch and k.cubin[:4] == b"\x7fELF"
    assert f".target {arch}" in k.ptx
    assert "ld.local" not in k.ptx and "st.local" not in k.ptx, "a register tile spilled to local memory"
    family = name.split("-")[0]
    expected = {"local": "local", "shared": "shared", "packed": "sm100_packed", "reg": "reg"}[family]
    if family == "packed" and arch == "sm_90a":
        expected = "local"  # the packed gate needs sm_version >= 100
    assert k.plan.variant == expected


def shuffles(ptx):
    """(lane mask, clamp, member mask) of each shfl.sync.bfly, with registers that hold an
    immediate (mov.u32 %r, 6175) resolved to it; other registers stay as their names."""
    constants = dict(re.findall(r"mov\.[bu]32\s+(%r\d+),\s*(-?\d+);", ptx))
    found = re.findall(r"shfl\.sync\.bfly\.b32\s+\S+,\s*\S+,\s*(\S+),\s*(\S+),\s*(\S+);", ptx)
    return [tuple(constants.get(x, x) for x in f) for f in found]


def test_shared_shuffles_clamp_to_the_group():
    for threads, length, group in [(32, 8, 8), (48, 100, 32), (20, 100, 16), (32, 3, 4)]:
        k = tp.lower(tp.cta(threads).sum, f("f4", 2, length), storage="shared", target="sm_90a")
        found = shuffles(k.ptx)
        steps = int(np.log2(group))
        assert found and len(found) % steps == 0, found  # the compiler may unroll the loop over outputs
        clamp = ((32 - group) << 8) | 0x1F
        assert {int(c) for _, c, _ in found} == {clamp}
        assert {int(m) for m, _, _ in found} == {1 << i for i in range(steps)}


def test_warp_replica_shuffles_use_the_full_mask():
    k = tp.lower(tp.warp.sum, f("f4", 32, 8), axes=0, layout=S[(32, 8):(1 @ laneid, 1)], target="sm_90a")
    found = shuffles(k.ptx)
    assert len(found) == 8 * 5  # five butterfly steps for each of the 8 columns
    assert {(c, mm) for _, c, mm in found} == {("31", "-1")}
    assert {int(m) for m, _, _ in found} == {1, 2, 4, 8, 16}


def for_arch(kernel, arch):
    """The same plan's kernel (planned for another target) built for arch."""
    return tp._C.cuda.build_program(kernel.plan._bound.plan, arch)


def test_packed_sum_uses_add_f32x2_on_sm100_and_two_ftz_adds_before():
    a = f("f4", 37)
    native = tp.lower(tp.sum, a, target="sm_100a")
    assert native.plan.variant == "sm100_packed"
    # 4 chunks of 8: 3 further chunks x 4 packed adds, then the 3 adds of the 8->4->2->1 tree
    assert len(re.findall(r"add\.rn\.ftz\.f32x2", native.ptx)) == 3 * 4 + 3
    emulated = for_arch(native, "sm_90a")
    assert "f32x2" not in emulated["ptx"]
    assert len(re.findall(r"add\.rn\.ftz\.f32\s", emulated["ptx"])) == 2 * (3 * 4 + 3)


def test_packed_maxmin_use_three_operand_instructions_on_sm100():
    three = r"{}\.f32\s+%f\d+,\s*%f\d+,\s*%f\d+,\s*%f\d+;"
    for op, instr in [(tp.max, "max"), (tp.min, "min"), ]:
        k = tp.lower(op, f("f4", 40), target="sm_100a")
        assert len(re.findall(three.format(instr), k.ptx)) == 4 * 4 + 1  # 4 further chunks x 4 slots + the final
        old = for_arch(k, "sm_90a")["ptx"]
        assert not re.findall(three.format(instr), old)
    nan = tp.lower(tp.max, f("f4", 16), target="sm_100a", propagate_nan=True)
    assert re.findall(r"max\.NaN\.f32\s+%f\d+,\s*%f\d+,\s*%f\d+,\s*%f\d+;", nan.ptx)


def test_reg_uses_the_dtype_instructions():
    # counted per tile: the frame's loop over the tiles of a block may repeat the body
    def per_body(pattern, ptx, per_tile):
        n = len(re.findall(pattern, ptx))
        assert n > 0 and n % per_tile == 0, (pattern, n, per_tile)
        return n // per_tile

    sqrt32 = tp.lower(tp.warp.sqrt, f("f4", 32, 8), layout=S[(32, 8):(1 @ laneid, 1)], target="sm_90a")
    per_body(r"sqrt\.rn\.f32", sqrt32.ptx, 8)  # one per register of the lane's bundle
    fma16 = tp.lower(tp.fma, f("f2", 4), f("f2", 4), f("f2", 4), target="sm_90a")
    per_body(r"fma\.rn\.f16x2\s", fma16.ptx, 2)  # two registers per instruction
    assert not re.findall(r"fma\.rn\.f16\s", fma16.ptx)
    add_bf16 = tp.lower(tp.add, f(BF16, 3), 1.0, target="sm_90a")
    bodies = per_body(r"\badd(\.rn)?\.bf16x2\s", add_bf16.ptx, 1)  # a pair, in bfloat16,
    assert per_body(r"\badd(\.rn)?\.bf16\s", add_bf16.ptx, 1) == bodies  # and the odd one alone
    exp16 = tp.lower(tp.exp, f("f2", 6), target="sm_90a")
    # tileprim's own exp, in float, one half at a time (the normal form per element, the general
    # one out of line once)
    assert len(re.findall(r"fma\.rn\.f32", exp16.ptx)) >= 6
    assert not re.findall(r"f16x2", exp16.ptx)


APPROXIMATIONS = r"\b(ex2|lg2|rsqrt|sqrt|rcp|div|sin|cos|tanh)\.approx|\bdiv\.full"


ESTIMATED = [(op, d) for op in ("silu", "sigmoid") for d in ("f2", BF16)]  # the 16-bit maps estimated on the GPU


def _callees(ptx):
    return re.findall(r"\bcall(?:\.uni)?\s+(?:\([^)]*\),\s*)?([\w$]+)", ptx)


@pytest.mark.parametrize("op,dtype", [(op, d) for op in ("exp", "exp2", "log", "log2", "rsqrt", "silu", "sqrt")
                                      for d in ("f4", "f8", "f2")]
                         + [(op, d) for op in ("tanh", "erf", "sigmoid") for d in ("f4", "f8", "f2", BF16)]
                         + [(op, d) for op in ("reciprocal", "fdiv") for d in ("f4", "f8", "f2", BF16)])
def test_maps_use_only_ieee_rounded_instructions(op, dtype):
    # the same bits as the CPU backend need every step IEEE-rounded: no approximation instruction
    # (CUDA's expf, __expf, hexp, rsqrtf, hsqrt, __hdiv would bring ex2.approx, rsqrt.approx, ...),
    # but in the 16-bit silu and sigmoid, whose estimate is checked (the next test)
    args = (f(dtype, 3, 5),) * (2 if op == "fdiv" else 1)
    ptx = tp.lower(getattr(tp, op), *args, batch_dims=1, target="sm_90a").ptx
    assert bool(re.findall(APPROXIMATIONS, ptx)) == ((op, dtype) in ESTIMATED)
    # nor a math library function: the one call is tileprim's own rare path (exp's beyond its
    # normal range, 16-bit log's specials, the 16-bit silu and sigmoid's exact form where their
    # estimate may round otherwise), kept out of line; its body is in this PTX, checked above
    callees = _callees(ptx)
    own = r"apply_out_of_line|ieee_math16\d+(silu|sigmoid)_exact"
    assert all(re.search(own, c) for c in callees), callees
    assert bool(callees) == (op in ("exp", "exp2") or (op in ("log", "log2", "silu", "sigmoid") and dtype in ("f2", BF16)))


@pytest.mark.parametrize("op,dtype", ESTIMATED)
def test_16_bit_silu_and_sigmoid_maps_estimate_with_the_fast_forms_and_check(op, dtype):
    # an exact map's bits with ex2.approx and rcp.approx: each slot's estimate and the two ends of its
    # bound rounded in pairs (estimated.cuh); where the ends differ, the exact op, out of line
    lowered = tp.lower(getattr(tp, op), f(dtype, 3, 8), batch_dims=1, target="sm_90a")
    for form in (r"ex2\.approx\.ftz\.f32", r"rcp\.approx\.ftz\.f32"):
        assert len(re.findall(form, lowered.ptx)) >= 8, form  # one an element
    pair = r"cvt\.rn\.(f16x2|bf16x2)\.f32"
    assert len(re.findall(pair, lowered.ptx)) >= 8  # the low and the high ends, two elements each
    assert any("apply_out_of_line" in c for c in _callees(lowered.ptx))
    assert "tp::map_op::Fast" not in lowered.source  # an exact map: the check is the map's own


FAST_FORMS = {"exp": [r"ex2\.approx\.ftz\.f32"], "exp2": [r"ex2\.approx\.ftz\.f32"],
              "log": [r"lg2\.approx\.f32"], "log2": [r"lg2\.approx\.f32"], "rsqrt": [r"rsqrt\.approx\.f32"],
              "silu": [r"ex2\.approx\.ftz\.f32", r"rcp\.approx\.ftz\.f32"],
              "sigmoid": [r"ex2\.approx\.ftz\.f32", r"rcp\.approx\.ftz\.f32"],
              "tanh": [r"tanh\.approx\.(f32|f16|bf16)\b"]}


@pytest.mark.parametrize("op", sorted(FAST_FORMS))
@pytest.mark.parametrize("dtype", ["f4", "f2", BF16])
def test_fastmath_maps_run_the_hardware_approximations(op, dtype):
    x = f(dtype, 3, 5)
    fast = tp.lower(getattr(tp, op), x, batch_dims=1, target="sm_90a", fastmath=True)
    for form in FAST_FORMS[op]:
        assert re.findall(form, fast.ptx), (op, form)
    exact = tp.lower(getattr(tp, op), x, batch_dims=1, target="sm_90a")
    assert bool(re.findall(APPROXIMATIONS, exact.ptx)) == ((op, dtype) in ESTIMATED)
    assert fast.source != exact.source  # so the kernel cache keeps them apart


@pytest.mark.parametrize("dtype,target,form", [("f4", "sm_90a", "f32"), ("f2", "sm_90a", "f16"), (BF16, "sm_90a", "bf16"),
                                               ("f2", "sm_80", "f16"), (BF16, "sm_80", "f32")])
def test_fastmath_tanh_runs_the_16_bit_instruction_where_the_target_has_it(dtype, target, form):
    ptx = tp.lower(tp.tanh, f(dtype, 3, 5), batch_dims=1, target=target, fastmath=True).ptx
    assert set(re.findall(r"\btanh\.approx\.(\w+)", ptx)) == {form}  # bfloat16's needs sm_90: in float before


def test_fastmath_leaves_float64_erf_and_the_ieee_exact_ops_alone():
    for op, args in [("exp", (f("f8", 3, 5),)), ("silu", (f("f8", 3, 5),)), ("add", (f("f4", 3, 5),) * 2),
                     ("tanh", (f("f8", 3, 5),)), ("sigmoid", (f("f8", 3, 5),)), ("erf", (f(BF16, 3, 5),)),
                     ("erf", (f("f4", 3, 5),)),
                     ("fma", (f(BF16, 3, 5),) * 3), ("sqrt", (f("f4", 3, 5),)), ("cast", (f("f4", 3, 5), "float16")),
                     ("maximum", (f("f2", 3, 5),) * 2), ("fdiv", (f("f4", 3, 5),) * 2)]:
        ptx = tp.lower(getattr(tp, op), *args, batch_dims=1, target="sm_90a", fastmath=True).ptx
        assert not re.findall(APPROXIMATIONS, ptx), op


@pytest.mark.parametrize("dtype", ["f4", BF16])
def test_fastmath_divides_by_one_value_through_its_reciprocal(dtype):
    x = f(dtype, 4, 8)
    fast = tp.lower(tp.fdiv, x, 3.0, batch_dims=1, target="sm_90a", fastmath=True).ptx
    exact = tp.lower(tp.fdiv, x, 3.0, batch_dims=1, target="sm_90a").ptx
    def count(pattern, ptx):
        return len(re.findall(pattern, ptx))
    products, corrections = r"\bmul(\.rn)?\.f32", r"\bfma\.rn\.f32"
    assert count(products, fast) >= 8 > count(corrections, fast)  # a product an element (of 8), no correction
    # exact: a product and Markstein's two fmas an element in float (numeric.cuh's FloatDivisor),
    # bfloat16's too, rounded once; a bundle leaving the range divides as the host does (bfloat16:
    # in double)
    assert count(products, exact) >= 8 and count(corrections, exact) >= 16
    assert dtype != BF16 or re.findall(r"\bdiv\.rn\.f64", exact)


def test_a_fastmath_program_holds_ex2_approx_and_an_exact_one_does_not():
    @tp.program(scope=tp.cta(128))
    def softmax(x):
        xf = tp.cast(x, "float32")
        e = tp.exp(xf - tp.max(xf, axes=-1, keepdims=True))
        return tp.cast(e / tp.sum(e, axes=-1, keepdims=True), x.dtype)

    x = f(BF16, 2, 4096)
    exact = tp.lower(softmax, x, batch_dims=1, target="sm_90a")
    fast = tp.lower(softmax, x, batch_dims=1, target="sm_90a", fastmath=True)
    assert re.findall(r"ex2\.approx\.ftz\.f32", fast.ptx) and not re.findall(APPROXIMATIONS, exact.ptx)
    assert "tp::map_op::FastExp" in fast.source and "tp::map_op::FastFdiv" in fast.source
    assert "tp::map_op::Fast" not in exact.source


def _dividing_by_a_sum(numerator, keepdims=True):
    @tp.program(scope=tp.cta(128))
    def divided(x):
        xf = tp.cast(x, "float32")
        e = numerator(xf - tp.max(xf, axes=-1, keepdims=True))
        return tp.cast(e / tp.sum(e, axes=-1, keepdims=keepdims), x.dtype)
    return divided


@tp.program(scope=tp.cta(128))
def _by_another_sum(x):
    xf = tp.cast(x, "float32")
    e = tp.exp(xf - tp.max(xf, axes=-1, keepdims=True))
    return tp.cast(e / tp.sum(e * 2.0, axes=-1, keepdims=True), x.dtype)


@pytest.mark.parametrize("dtype", ["f4", BF16])
def test_a_softmax_divides_by_its_sum_without_the_too_large_check(dtype):
    """exp(x - max) / sum(exp(x - max)): no numerator exceeds its own sum, so the GPU's division
    by the row's one value (numeric.cuh's FloatDivisor) compares each element once, for a
    numerator too small; any other division by one value compares twice."""
    x = f(dtype, 2, 4096)
    lower = lambda program, rows=x: tp.lower(program, rows, batch_dims=1, target="sm_90a")
    part = lower(_dividing_by_a_sum(tp.exp))
    for same in [part, lower(_dividing_by_a_sum(tp.exp2)), lower(_dividing_by_a_sum(tp.exp, keepdims=False))]:
        assert "tp::map_op::FdivOfPart" in same.source
    # a tile that may hold negatives, a sum of another tile, or (16, 16) tiles whose row sums
    # without keepdims broadcast along the rows (each element meets another row's sum): checked
    whole = lower(_dividing_by_a_sum(lambda d: d))
    crossed = lower(_dividing_by_a_sum(tp.exp, keepdims=False), f(dtype, 2, 16, 16))
    another = lower(_by_another_sum)
    for kernel in [whole, another, crossed]:
        assert "FdivOfPart" not in kernel.source and "tp::map_op::Fdiv," in kernel.source
    checks = lambda kernel: len(re.findall(r"\bsetp\.", kernel.ptx))
    assert checks(part) + 32 <= checks(another)  # one comparison fewer for each of a thread's 32 elements


@pytest.mark.parametrize("dtype", ["f4", BF16])
def test_fastmath_activation_programs_hold_their_approximations_and_exact_ones_do_not(dtype):
    @tp.program
    def silu_from_sigmoid(x):
        xf = tp.cast(x, "float32")
        return tp.cast(xf * tp.sigmoid(xf), x.dtype)

    @tp.program
    def gelu_through_tanh(x):
        xf = tp.cast(x, "float32")
        return tp.cast(xf * (0.5 + 0.5 * tp.tanh(0.7978845608 * tp.fma(0.044715 * xf, xf * xf, xf))), x.dtype)

    x = f(dtype, 64, 8)
    for program, forms in [(gelu_through_tanh, [r"tanh\.approx\.f32"]),
                           (silu_from_sigmoid, [r"ex2\.approx\.ftz\.f32", r"rcp\.approx\.ftz\.f32"])]:
        fast = tp.lower(program, x, batch_dims=1, target="sm_90a", fastmath=True)
        exact = tp.lower(program, x, batch_dims=1, target="sm_90a")
        for form in forms:
            assert re.findall(form, fast.ptx), (program, form)
        # an exact program uses them only to estimate a chain rounded to 16 bits, checked slot by slot
        estimated = "tp::rounded_estimates" in exact.source
        assert estimated == (program is silu_from_sigmoid and dtype == BF16), program
        assert bool(re.findall(APPROXIMATIONS, exact.ptx)) == estimated, program


def test_an_arch_nvrtc_does_not_know_falls_back_to_ptx():
    if 101 in tp._C.cuda.supported_archs():
        pytest.skip("this NVRTC knows sm_101 (CUDA 12.8/12.9); CUDA 13 renamed it sm_110")
    k = tp.lower(tp.sum, f("f4", 37), target="sm_101a")
    assert k.arch.startswith("compute_") and k.cubin == b"" and ".target" in k.ptx
    assert k.plan.variant == "sm100_packed"


def test_lowering_is_cached():
    a = f("f4", 4, 4)
    first = tp.lower(tp.cta(16).sum, a, storage="shared", target="sm_90a")
    again = tp.lower(tp.cta(16).sum, a, storage="shared", target="sm_90a")
    assert again.origin == "memory" and again.cubin == first.cubin
    assert "tileprim kernel: tp.sum at cta(16): sum [shared]" in again.source and "#include <tileprim/tileprim.cuh>" in again.source


def test_no_driver_means_cpu_backend_with_reason():
    info = tp.info()
    if info["driver"]["ok"]:
        pytest.skip("a CUDA driver is present")
    assert info["default_backend"] == "cpu"
    assert "libcuda.so.1" in info["backends"]["cuda"]
    with pytest.raises(ValueError, match="backend: 'cuda' is not usable here: .*libcuda.so.1"):
        tp.sum(f("f4", 4), backend="cuda")


@pytest.mark.parametrize("dtype,accumulate", [("f4", None), ("f2", None), ("f2", "float32"), (BF16, "float32"),
                                              ("i4", None)])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("pingpong", [False, True])
def test_treduce_kernels_compile_with_16_byte_loads_and_no_local_memory(dtype, accumulate, op, pingpong):
    group = tp.comm.ParallelGroup([f(dtype, 16, 64)] * 4, root=1)
    k = tp.lower(tp.comm.treduce, group, op=op, accumulate=accumulate, pingpong=pingpong, target="sm_90a")
    assert k.cubin[:4] == b"\x7fELF" and "ld.global.v4.u32" in k.ptx and "st.global.v4.u32" in k.ptx
    assert "ld.local" not in k.ptx and "st.local" not in k.ptx
    # signal flags only rise: a host may raise "done" for a failed call while an older kernel runs
    assert "red.release.sys.global.max.u64" in k.ptx and "st.release" not in k.ptx


@pytest.mark.parametrize("arch,async_copies", [("sm_90a", True), ("sm_80", True), ("sm_75", False)])
def test_shared_tiles_stage_asynchronously_from_sm80(arch, async_copies):
    k = tp.lower(tp.cta(128).sum, f("f4", 1000, 128), axes=-1, batch_dims=1, target=arch)
    assert ("cp.async.cg.shared.global" in k.ptx) == async_copies
    assert ("cp.async.wait_group" in k.ptx) == async_copies
    if async_copies:
        assert "pipelined parts" in k.instances_why and "kStages = 4" in k.source


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_long_thread_rows_stream_through_warp_windows_without_local_memory(arch):
    # whole warps copy their lanes' rows 128 bytes each ahead into a shared window (cp.async),
    # read back by 16-byte vectors; partial warps and unaligned rows read in place
    k = tp.lower(tp.thread.sum, f("f4", 100, 1024), axes=-1, batch_dims=1, target=arch)
    assert "block.stream_run<4>(" in k.source  # else in place (tp::GlobalRun)
    assert "stage_in0" not in k.source and k.shared_bytes == 4 * 4 * 4096  # 4 warps of 4 chunks
    assert "4-chunk window (65536 bytes)" in k.instances_why
    assert "cp.async.cg.shared.global" in k.ptx and "ld.shared.v4" in k.ptx
    assert "ld.global.nc.L2::128B.v4.u32" in k.ptx
    assert "ld.local" not in k.ptx and "st.local" not in k.ptx


def test_long_thread_rows_before_sm80_are_read_in_place():
    k = tp.lower(tp.thread.sum, f("f4", 100, 1024), axes=-1, batch_dims=1, target="sm_75")
    assert "stream_run" not in k.source and "tp::read_in_place(" in k.source and k.shared_bytes == 0
    assert "ld.local" not in k.ptx and "st.local" not in k.ptx


@pytest.mark.parametrize("arch,stages", [("sm_90a", 4), ("sm_86", 3)])
def test_long_lane_runs_stream_through_windows_that_fit_the_arch(arch, stages):
    # lane i folds its 256 elements i*256, ... of a row of 8192; 8 warps per block
    k = tp.lower(tp.warp.sum, f("f4", 10, 32, 256), axes=(-2, -1), batch_dims=1,
                 layout=S[(32, 256):(1 @ laneid, 1)], target=arch)
    assert f"block.stream_run<{stages}>(" in k.source and k.shared_bytes == 8 * stages * 4096
    assert "ld.local" not in k.ptx and "st.local" not in k.ptx


@pytest.mark.parametrize("dtype", ["f2", "f8"])
def test_long_rows_of_other_widths_stream_by_16_byte_vectors(dtype):
    k = tp.lower(tp.thread.max, f(dtype, 100, 1024), axes=-1, batch_dims=1, target="sm_90a")
    reads = set(re.findall(r"ld\.shared\.(\S+)", k.ptx))
    assert "block.stream_run<" in k.source and reads == {"v4.u32" if dtype == "f2" else "v2.f64"}
    assert "ld.local" not in k.ptx and "st.local" not in k.ptx


def test_a_fold_into_several_outputs_reads_its_run_in_place():
    # the window needs one in-order walk of each run; a (256, 3) tile folded across dim 0 reads
    # its run three times over
    k = tp.lower(tp.thread.sum, f("f4", 100, 256, 3), axes=1, batch_dims=1, target="sm_90a")
    assert "stream_run" not in k.source and "tp::read_in_place(" in k.source


def test_short_lane_runs_load_every_round_up_front():
    # one element per lane of a warp's row: no staging, 16 rounds' loads issued before any fold
    k = tp.lower(tp.warp.sum, f("f4", 1000, 32, 1), axes=(-2, -1), batch_dims=1,
                 layout=S[(32, 1):(1 @ laneid, 1)], target="sm_90a")
    assert k.shared_bytes == 0 and "in0_rounds[kRounds][1]" in k.source and "kRounds = 16" in k.source
    assert "ld.local" not in k.ptx and "st.local" not in k.ptx


@pytest.mark.parametrize("dtype", ["f4", "f8"])
def test_long_rows_fold_a_step_at_a_time_in_one_round(dtype):
    # a fold through a run read from memory steps a chunk at a time rather than unrolling the
    # row whole, and the tile takes no rounds: the worst case (NaN-propagating min, accum, so
    # the output is loaded too) once compiled for minutes into megabytes of PTX and spilled
    x, out = f(dtype, 16, 1024), f(dtype, 16)
    k = tp.lower(tp.thread.min, x, axes=-1, batch_dims=1, out=out, accum=True, propagate_nan=True, target="sm_90a")
    assert "kRounds = 1;" in k.source and "block.stream_run<" in k.source
    assert len(k.ptx) < 200_000, len(k.ptx)
    assert "ld.local" not in k.ptx and "st.local" not in k.ptx


@pytest.mark.parametrize("dtype", ["f4", "f2"])
@pytest.mark.parametrize("k", [257, 1000])
def test_long_rows_past_a_whole_number_of_steps_stay_out_of_local_memory(dtype, k):
    # the fold's last elements (past its unrolled steps) pick their vector element at run time
    for fn in (tp.thread.sum, tp.thread.max):
        ptx = tp.lower(fn, f(dtype, 301, k), axes=-1, batch_dims=1, target="sm_90a").ptx
        assert "ld.local" not in ptx and "st.local" not in ptx


def test_maps_over_a_thousand_slots_per_thread_compile_a_chunk_at_a_time():
    # unrolled whole, a thread's 1024 bfloat16 silus took NVRTC minutes and megabytes of PTX
    k = tp.lower(tp.silu, f(BF16, 4, 1024), batch_dims=1, scope=tp.thread, target="sm_90a")
    assert "tp::for_each_chunk<32>(" in k.source and "kBodySlots = 32;" in k.source
    assert "1024 slots 32 at a time" in k.instances_why
    assert len(k.ptx) < 600_000, len(k.ptx)  # 32 silus (tileprim's own, ~100 instructions each)
    assert "ld.local" not in k.ptx and "st.local" not in k.ptx
    small = tp.lower(tp.silu, f(BF16, 4, 8), batch_dims=1, scope=tp.thread, target="sm_90a")
    assert "chunk" not in small.source and "kBodySlots = 8;" in small.source


@tp.program
def _gated(a, b):
    return tp.cast(tp.silu(tp.cast(a, "float32")) * tp.cast(b, "float32"), a.dtype)


@tp.program
def _gated_twice(a, b, c):  # a product of three, sigmoid's and exp's estimates in one chain
    af = tp.cast(a, "float32")
    return tp.cast(tp.sigmoid(af) * tp.cast(b, "float32") / (tp.exp(af) * tp.cast(c, "float32")), a.dtype)


@tp.program
def _gated_and_kept(a, b):  # the activation is returned too: its float bits must be the exact ones
    s = tp.silu(tp.cast(a, "float32"))
    return tp.cast(s * tp.cast(b, "float32"), a.dtype), s


@tp.program
def _shifted_gate(x, b):  # a leaf made from the input and a row's value
    xf = tp.cast(x, "float32")
    return tp.cast(tp.exp(xf - tp.max(xf, axes=-1, keepdims=True)) * tp.cast(b, "float32"), x.dtype)


@tp.program
def _gated_sum(a, b):  # a sum is no product: its relative error has no bound
    return tp.cast(tp.silu(tp.cast(a, "float32")) + tp.cast(b, "float32"), a.dtype)


@pytest.mark.parametrize("dtype", ["f2", BF16])
def test_a_chain_rounded_to_16_bits_is_estimated_then_checked(dtype):
    """cast(silu(a) * b) to 16 bits: the kernel runs silu's fast form, bounds each slot's estimate
    and runs exactly only the slots whose rounding it cannot vouch for (elementwise/estimated.cuh)."""
    x = f(dtype, 64, 8)
    kernel = lambda program, *args, **kw: tp.lower(program, *args, batch_dims=1, target="sm_90a", **kw)
    lower = lambda program, *args, **kw: kernel(program, *args, **kw).source
    gated = lower(_gated, x, x)
    # silu's bound read from the 16-bit input (its widening is part of the chain), the exact form out
    # of line for the missed slots, and ptxas asked for the registers such a kernel runs best at
    assert "tp::map_op::FastSilu" in gated and "tp::Estimated<tp::map_op::Silu>::bound(tp::widen(v0[f])" in gated
    assert re.search(r"__noinline__ \w+ exact_chain4\(const int lane, const \w+ l0, const \w+ l1\)", gated)
    # the cast is the check's (each slot rounded as it is checked), no call of its own; the rare path
    # puts the exact 16-bit result in place, its inputs read again from global memory
    body = gated[gated.index('extern "C"'):]
    assert "tp::rounded_estimates(v6, v5, bound, least)" in body
    assert body.count("tp::map_op::Cast,") == 2  # the widenings
    assert re.search(r"tp::set_slot\(v6, bit, tp_gen::exact_chain4\(lane, "
                     r"tp::input_at<P0>\(g_in0 \+ tile \* 8, lane, bit\), "
                     r"tp::input_at<P1>\(g_in1 \+ tile \* 8, lane, bit\)\)\)", gated)
    # so SwiGLU's kernel needs no more registers than 16 blocks of 128 threads leave it
    assert "tp::map_op::Silu, " in gated and kernel(_gated, x, x).registers <= 32
    # GeGLU's leaves (x and sigmoid's argument, floats made from a) are made again on the rare path
    # from the inputs, read again, so they need not stay live either; a row's value is passed
    geglu = kernel(tp.layers.gelu_tanh_mul, x, x)
    assert re.search(r"__noinline__ \w+ exact_chain\d+\(const int lane, const \w+ l0, const \w+ l1\)", geglu.source)
    assert geglu.registers <= 32
    shifted = lower(_shifted_gate, x, x)
    assert re.search(r"exact_chain\d+\(const int lane, const \w+ l0, const float o\d+, const \w+ l1\)", shifted)
    twice = lower(_gated_twice, x, x, x)  # the least magnitude of the products inside it checked
    assert "FastSigmoid" in twice and "FastExp" in twice and "const auto least = [&](int f) { return tp::" in twice
    # nothing to estimate: the float value is kept, a sum, already fast, or returned in float32
    for source in [lower(_gated_and_kept, x, x), lower(_gated_sum, x, x), lower(tp.layers.silu_mul, *[f("f4", 64, 8)] * 2)]:
        assert "rounded_estimates" not in source
    fast = lower(_gated, x, x, fastmath=True)
    assert "rounded_estimates" not in fast and "FastSilu" in fast


@pytest.mark.parametrize("target", ["sm_75", "compute_75"])
def test_bfloat16_kernels_before_sm80_are_refused_by_name(target):
    """bfloat16 arithmetic is sm_80's: a bfloat16 kernel for an older target is refused with the rule
    (it once failed inside NVRTC on the device headers); float16 and float32 kernels still build."""
    bf16 = np.ones((4, 1000), ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match=f"dtype: bfloat16 kernels need sm_80 or later.*target {target}"):
        tp.lower(tp.exp, bf16, batch_dims=1, target=target)
    with pytest.raises(ValueError, match="bfloat16 kernels need sm_80"):
        tp.lower(tp.program(lambda x: tp.cast(tp.sum(tp.cast(x, "float32"), axes=-1), x.dtype)), bf16,
                 batch_dims=1, target=target)
    assert tp.lower(tp.exp, bf16.astype(np.float16), batch_dims=1, target=target).arch == target
    assert tp.lower(tp.exp, bf16, batch_dims=1, target="sm_80").arch == "sm_80"
