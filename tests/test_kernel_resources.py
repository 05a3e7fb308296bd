"""What a lowered kernel takes of an SM, known without a GPU: registers and local memory per
thread read from the CUBIN NVRTC builds, and the blocks an SM holds under CUDA's occupancy rules
(tp.lower's Kernel.registers, .local_bytes, .blocks_per_sm, .occupancy, .residency_why). The
reader of the CUBIN takes hostile bytes without crashing; on a GPU the figures match the driver's."""
import ctypes
import struct

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tileprim as tp
from tileprim._platform.backends import device_arch
from conftest import cuda_usable
import programs

pytestmark = pytest.mark.skipif(not tp.info()["nvrtc"]["ok"], reason="NVRTC is not available")
cuda = tp._C.cuda


softmax = tp.program(programs.softmax)  # bfloat16 rows: float32 inside


@tp.program
def centred_times_sum(x):  # every element stays live across the sum: a thread's row of 300 spills
    y = x - tp.max(x, axes=-1, keepdims=True)
    return y * tp.sum(y, axes=-1, keepdims=True)


ROW = np.ones((8, 300), np.float32)


def lowered():
    """Kernels of every kind: a standalone map and reduction, a program, one that spills, treduce."""
    x = np.ones((8, 1024), np.float32)
    return {
        "map": tp.lower(tp.exp, np.ones((1024, 32), np.float32), batch_dims=1, target="sm_90a"),
        "cta_sum": tp.lower(tp.sum, np.ones((8, 4096), np.float32), batch_dims=1, scope=tp.cta(1024),
                            target="sm_90a"),
        "program": tp.lower(softmax, x, batch_dims=1, scope=tp.cta(128), target="sm_100a"),
        "spills": tp.lower(centred_times_sum, ROW, batch_dims=1, scope=tp.thread, target="sm_90a"),
        "treduce": tp.lower(tp.comm.treduce, tp.comm.ParallelGroup([np.ones((64, 256), np.float32)] * 2,
                                                                   root=0), target="sm_90a"),
    }


@pytest.fixture(scope="module")
def kernels():
    return lowered()


def test_every_kernel_says_its_registers_and_blocks_per_sm(kernels):
    for name, k in kernels.items():
        assert isinstance(k.registers, int) and 1 <= k.registers <= 255, name
        assert k.registers * k.block_threads <= 65536, name  # __launch_bounds__ holds
        assert 1 <= k.blocks_per_sm <= 32 and 0 < k.occupancy <= 1, name
        assert k.residency_why.split(":")[0] in ("registers", "shared memory", "threads", "blocks", "barriers"), name
        assert f"{k.registers} registers/thread" in repr(k), name
    assert kernels["cta_sum"].registers <= 64  # 1024 threads a block: at most 64 each
    assert kernels["cta_sum"].blocks_per_sm == 2
    assert kernels["cta_sum"].residency_why.startswith("threads: 2048")


def test_local_memory_shows_spilled_rows(kernels):
    assert kernels["map"].local_bytes == 0 and kernels["program"].local_bytes == 0
    # a thread's row of 300 float32 live at once cannot stay in 255 registers: ptxas keeps it in local memory
    assert kernels["spills"].local_bytes >= 300 * 4
    assert "B local/thread" in kernels["spills"].resources_words


def test_a_ptx_only_kernel_knows_no_registers():
    if 101 in cuda.supported_archs():
        pytest.skip("this NVRTC knows sm_101 (CUDA 12.8/12.9); CUDA 13 renamed it sm_110")
    k = tp.lower(tp.sum, np.ones(37, np.float32), target="sm_101a")  # PTX for the driver to finish
    assert k.cubin == b"" and k.registers is None and k.local_bytes is None
    assert k.blocks_per_sm is None and k.occupancy is None and "PTX only" in k.residency_why
    assert "registers not known" in repr(k)


@pytest.mark.parametrize("arch, threads, registers, shared, blocks, limit", [
    ("sm_90a", 256, 80, 1024, 3, "registers"),      # 2560 registers a warp: 6 warps in each of 4 partitions
    ("sm_90a", 256, 128, 1024, 2, "registers"),
    ("sm_90a", 256, 96, 0, 2, "registers"),
    ("sm_90a", 128, 32, 100 * 1024, 2, "shared memory"),  # 101 KiB a block with CUDA's 1 KiB of 228
    ("sm_90a", 1024, 16, 0, 2, "threads"),
    ("sm_90a", 32, 16, 0, 32, "blocks"),
    ("sm_86", 512, 32, 0, 3, "threads"),            # 1536 threads an SM
    ("sm_89", 32, 16, 0, 24, "blocks"),
    ("sm_80", 128, 32, 160 * 1024, 1, "shared memory"),
    ("sm_90a", 128, 32, 228 * 1024, 0, "shared memory"),  # past 227 KiB a block: none fits
])
def test_residency_follows_cudas_occupancy_rules(arch, threads, registers, shared, blocks, limit):
    r = cuda.residency(arch, threads, registers, shared, 1)
    assert r["blocks"] == blocks and r["limit"].startswith(limit), r
    assert r["warps"] == blocks * ((threads + 31) // 32)
    assert r["max_warps"] == {"sm_86": 48, "sm_89": 48}.get(arch, 64)


@pytest.mark.parametrize("arch, barriers, blocks, limit", [
    ("sm_90a", 16, 4, "barriers: 16 named per block (64 per SM) allow 4 blocks of 8 warps"),  # an id in a register
    ("sm_90a", 3, 8, "threads"),      # two instances: ids 1 and 2 beside __syncthreads' 0
    ("sm_100a", 9, 7, "barriers"),    # eight instances
    ("sm_120", 16, 2, "barriers"),    # 32 blocks an SM, one barrier each
    ("sm_80", 16, 8, "threads"),      # before sm_90, barriers bind nothing
])
def test_named_barriers_bound_the_blocks_per_sm(arch, barriers, blocks, limit):
    r = cuda.residency(arch, 256, 32, 0, barriers)
    assert r["blocks"] == blocks and r["limit"].startswith(limit), r


def test_instance_barriers_are_named_by_immediates(kernels):
    """A block of several scope instances syncs each on its own barrier, its id an immediate: ptxas
    then counts ids 0..instances, where an id in a register would reserve all 16."""
    k = kernels["program"]
    assert k.instances_per_block == 2 and '"r"(1 + instance)' not in k.source
    assert cuda.function_resources(k.cubin, "tp_kernel")[3] == 3
    assert cuda.function_resources(kernels["cta_sum"].cubin, "tp_kernel")[3] == 1  # __syncthreads alone
    four = tp.lower(softmax, np.ones((8, 1024), np.float32), batch_dims=1, scope=tp.cta(64), target="sm_90a")
    assert four.instances_per_block == 4 and cuda.function_resources(four.cubin, "tp_kernel")[3] == 5
    assert four.blocks_per_sm > 4 and not four.residency_why.startswith("barriers")  # 64 // 16 before


ROWS24K = np.ones((2, 24576), ml_dtypes.bfloat16)


def test_few_blocks_by_registers_ask_ptxas_for_one_more():
    """Softmax of bfloat16 rows of 24576 at cta(256): more than 128 registers a thread hold an SM to
    one block; asked for 2 (__launch_bounds__(256, 2)), ptxas fits 128 without local memory, and
    that kernel is kept. A kernel an SM holds many of is compiled once, as it is."""
    k = tp.lower(softmax, ROWS24K, batch_dims=1, scope=tp.cta(256), target="sm_90a")
    assert k.min_blocks == 2 and "__launch_bounds__(256, 2)" in k.source
    assert k.registers <= 128 and k.local_bytes == 0 and k.blocks_per_sm == 2
    assert "as asked of ptxas" in k.resources_words
    many = tp.lower(softmax, np.ones((8, 1024), np.float32), batch_dims=1, scope=tp.cta(128), target="sm_90a")
    assert many.min_blocks == 0 and "__launch_bounds__(256)" in many.source


def test_few_warps_by_registers_take_blocks_of_fewer_instances():
    """RMSNorm of bfloat16 rows of 4097 at cta(64), held in registers: 146 registers a thread, so
    blocks of the scope's 4 instances (256 threads) leave an SM one block, 8 warps; blocks of 3 fit
    two, 12 warps (an H200 ran such rows 1.5x faster at 12 warps). The rows run as before, fewer to
    a block; a kernel whose registers leave many warps keeps the scope's instances."""
    rmsnorm = tp.program(programs.rmsnorm, staging="registers")
    x, w = np.ones((8, 4097), ml_dtypes.bfloat16), np.ones(4097, ml_dtypes.bfloat16)
    k = tp.lower(rmsnorm, x, w, 1e-6, batch_dims=1, scope=tp.cta(64), target="sm_90a")
    assert k.registers > 128 and k.local_bytes == 0
    assert k.instances_per_block == 3 and k.blocks_per_sm == 2, (k.instances_per_block, k.blocks_per_sm)
    assert "so that more warps fit" in k.instances_why, k.instances_why
    many = tp.lower(softmax, np.ones((8, 1024), np.float32), batch_dims=1, scope=tp.cta(64), target="sm_90a")
    assert many.instances_per_block == 4


@pytest.mark.parametrize("n, dtype", [(32000, np.float32), (32001, np.float32), (32000, ml_dtypes.bfloat16)])
def test_a_block_alone_on_its_sm_copies_its_next_row_into_shared_memory(n, dtype):
    """Softmax rows of 32000 at cta(512) held in registers: ptxas's registers leave an SM one block,
    and no other block's loads overlap its work (an H200 ran float32 at 3.31 TB/s, bfloat16 at
    1.63). That kernel is built again taking 8 rows in turn, each round's row copied into shared
    memory (cp.async, no registers) during the round before, and kept while it stays one block
    without local memory (3.43 and 1.93 TB/s). A padded row of 32001 copies its runs as well.
    RMSNorm's maps take less than the row's load: copied in, its rows of 16384 ran 3 % slower."""
    prog = tp.program(programs.softmax, staging="registers")
    k = tp.lower(prog, np.ones((3, n), dtype), batch_dims=1, scope=tp.cta(512), target="sm_90a")
    assert k.blocks_per_sm == 1 and k.local_bytes == 0 and k.tiles_per_block == 8
    assert "take_prefetched" in k.source and "cp.async.c" in k.ptx
    assert "during the round before" in k.staging["in0"] and "during the round before" in k.instances_why
    assert k.shared_bytes >= 512 * (n // 512) * np.dtype(dtype).itemsize
    two = tp.lower(prog, np.ones((3, 4096), dtype), batch_dims=1, scope=tp.cta(256), target="sm_90a")
    assert two.blocks_per_sm > 1 and "take_prefetched" not in two.source and two.tiles_per_block == 1
    rmsnorm = tp.program(programs.rmsnorm, staging="registers")  # its maps take a third of a row's load
    light = tp.lower(rmsnorm, np.ones((3, 16384), np.float32), np.ones(16384, np.float32), 1e-6, batch_dims=1,
                     scope=tp.cta(256), target="sm_90a")
    assert light.blocks_per_sm == 1 and "take_prefetched" not in light.source and light.tiles_per_block == 1
    if dtype == np.float32:  # no cp.async before sm_80 (nor bfloat16)
        assert "take_prefetched" not in tp.lower(prog, np.ones((3, n), dtype), batch_dims=1, scope=tp.cta(512),
                                                 target="sm_75").source


def test_residency_names_a_bad_argument():
    with pytest.raises(ValueError, match="block_threads"):
        cuda.residency("sm_90a", 0, 32, 0)
    with pytest.raises(ValueError, match="target"):
        cuda.residency("sm_42", 128, 32, 0)
    with pytest.raises(ValueError, match="barriers from 0 to 16"):
        cuda.residency("sm_90a", 128, 32, 0, 17)


def _with_section_type(cubin: bytes, section_name: bytes, new_type: int) -> bytes:
    """The CUBIN with one section's type changed (ELF64: section headers at e_shoff, 64 bytes each)."""
    image = bytearray(cubin)
    table, = struct.unpack_from("<Q", image, 0x28)
    count, names_index = struct.unpack_from("<HH", image, 0x3C)
    names_at, = struct.unpack_from("<Q", image, table + 64 * names_index + 24)
    for i in range(count):
        name, = struct.unpack_from("<I", image, table + 64 * i)
        if image[names_at + name:].split(b"\0", 1)[0] == section_name:
            struct.pack_into("<I", image, table + 64 * i + 4, new_type)
            struct.pack_into("<Q", image, table + 64 * i + 32, 1 << 62)  # and a size far past the image
    return bytes(image)


def test_a_section_without_bytes_is_never_read(kernels):
    """.nv.info claimed to be NOBITS with an enormous size: no figures from it, and no walk over it."""
    hostile = _with_section_type(kernels["map"].cubin, b".nv.info", 8)
    assert hostile != kernels["map"].cubin
    assert cuda.function_resources(hostile, "tp_kernel")[:2] == (-1, -1)


def test_the_cubin_reader_reports_unknown_for_what_is_not_a_cubin(kernels):
    cubin = kernels["map"].cubin
    registers, frame, static_shared, barriers = cuda.function_resources(cubin, "tp_kernel")
    assert registers == kernels["map"].registers and frame == 0 and static_shared >= 0 and 0 <= barriers <= 16
    for image, function in [(b"", "tp_kernel"), (b"garbage" * 20, "tp_kernel"), (cubin[:100], "tp_kernel"),
                            (cubin[: len(cubin) // 2], "tp_kernel"), (cubin, "no_such_function")]:
        assert cuda.function_resources(image, function) == (-1, -1, -1, -1)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_cubin_reader_survives_damaged_images(data):
    """Bytes flipped or cut anywhere: the reader answers (a figure or -1), never reads past the image."""
    cubin = bytearray(_small_cubin())
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(cubin) - 1))
        cubin[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(cubin)))
    registers, frame, static_shared, barriers = cuda.function_resources(bytes(cubin[:cut]), "tp_kernel")
    assert -1 <= registers <= 255 and frame >= -1 and static_shared >= -1 and -1 <= barriers <= 16


_SMALL = []


def _small_cubin():
    if not _SMALL:
        _SMALL.append(tp.lower(tp.exp, np.ones((4, 32), np.float32), batch_dims=1, target="sm_90a").cubin)
    return _SMALL[0]


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")
def test_the_figures_are_the_drivers_on_a_gpu():
    """On this GPU's architecture: the driver's registers, local bytes and occupancy of the same CUBINs."""
    driver = ctypes.CDLL("libcuda.so.1")
    arch = device_arch(0)
    check = lambda rc, what: rc == 0 or pytest.fail(f"{what}: CUresult {rc}")  # noqa: E731
    check(driver.cuInit(0), "cuInit")
    device, context = ctypes.c_int(), ctypes.c_void_p()
    check(driver.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    check(driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent_v2(context), "cuCtxPushCurrent")
    try:
        x = np.ones((8, 1024), np.float32)
        for k in [tp.lower(tp.exp, np.ones((1024, 32), np.float32), batch_dims=1, target=arch),
                  tp.lower(tp.sum, x, batch_dims=1, scope=tp.cta(256), target=arch),
                  tp.lower(softmax, x, batch_dims=1, scope=tp.cta(128), target=arch),
                  tp.lower(softmax, x, batch_dims=1, scope=tp.cta(64), target=arch),  # 4 instances, 5 barriers
                  tp.lower(softmax, ROWS24K, batch_dims=1, scope=tp.cta(256), target=arch),  # ptxas asked for 2
                  tp.lower(centred_times_sum, ROW, batch_dims=1, scope=tp.thread, target=arch)]:
            module, function, value = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()
            check(driver.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(k.cubin)), "cuModuleLoadData")
            check(driver.cuModuleGetFunction(ctypes.byref(function), module, b"tp_kernel"), "GetFunction")
            check(driver.cuFuncGetAttribute(ctypes.byref(value), 4, function), "NUM_REGS")
            assert value.value == k.registers, k
            check(driver.cuFuncGetAttribute(ctypes.byref(value), 3, function), "LOCAL_SIZE_BYTES")
            assert value.value == k.local_bytes, k
            check(driver.cuFuncSetAttribute(function, 8, k.shared_bytes), "MAX_DYNAMIC_SHARED_SIZE_BYTES")
            check(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                ctypes.byref(value), function, k.block_threads, ctypes.c_size_t(k.shared_bytes)), "occupancy")
            if k.residency_why.startswith("shared memory"):
                assert value.value <= k.blocks_per_sm, k  # ours: at the largest shared-memory carveout
            else:
                assert value.value == k.blocks_per_sm, k
            driver.cuModuleUnload(module)
    finally:
        driver.cuCtxPopCurrent_v2(ctypes.byref(context))
        driver.cuDevicePrimaryCtxRelease_v2(device)
