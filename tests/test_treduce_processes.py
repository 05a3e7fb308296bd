"""tp.comm.treduce with one process per rank on the CPU backend: 2, 3 and 4 processes, started as
a launcher would (tests/treduce_processes.py) and meeting through an init file, run the
one-process suite's kinds of cases; the root's dst must equal the one-process result and the
contract's fold bit for bit, every other rank gets None. Ranks that disagree, fail locally,
exit or hang end the call on every rank with an error instead of a hang."""
from __future__ import annotations

import itertools
import json
import os
import shlex
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tileprim as tp
from conftest import bits_equal, gpu_count
from test_treduce import poisoned
from treduce_oracle import treduce_reference
from treduce_processes import case_dst, case_tensors, options, saved_result

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "treduce_processes.py")


def launch(cases, world_size: int, tmp_path, deadline: float = 240, transport: str = "cpu",
           torchrun: bool = False) -> list:
    """Runs the ranks (each its own process through an init file, or torchrun's); each rank's
    record (a list, one entry per case it reached). TILEPRIM_RANK_WRAPPER, when set, is the command
    each rank runs under (e.g. compute-sanitizer and its options)."""
    cases_path, init_file = tmp_path / "cases.json", tmp_path / "init"
    wrapper = shlex.split(os.environ.get("TILEPRIM_RANK_WRAPPER", ""))
    cases_path.write_text(json.dumps(cases))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    if torchrun:
        ranks = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                   f"--nproc-per-node={world_size}", WORKER, str(cases_path), "-", "-", "-",
                                   str(tmp_path), transport], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT)]
    else:
        ranks = [subprocess.Popen([*wrapper, sys.executable, WORKER, str(cases_path), str(init_file), str(r),
                                   str(world_size), str(tmp_path), transport], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT)
                 for r in range(world_size)]
    logs = []
    for p in ranks:
        try:
            logs.append(p.communicate(timeout=deadline)[0].decode())
        except subprocess.TimeoutExpired:
            pytest.fail(f"the ranks did not finish within {deadline} s; where each waited:\n" + _stacks(ranks, logs))
    records = []
    for r in range(world_size):
        path = tmp_path / f"rank{r}.json"
        p = ranks[0 if torchrun else r]
        log = logs[0 if torchrun else r]
        records.append(json.loads(path.read_text()) if path.exists() else {"exit": p.returncode, "log": log})
    return records


def _stacks(ranks, logs: list) -> str:
    """Each rank still running asked for its Python stacks (the worker's faulthandler), then killed;
    the end of what each printed (``logs``: the output of the ranks already read)."""
    for p in ranks:
        if p.poll() is None:
            p.send_signal(signal.SIGUSR1)
    time.sleep(2)
    tails = []
    for r, p in enumerate(ranks):
        p.kill()
        log = logs[r] if r < len(logs) else p.communicate()[0].decode(errors="replace")
        tails.append(f"--- rank {r} (exit {p.wait()}):\n" + log[-3000:])
    return "\n".join(tails)


def one_process(case: dict, world_size: int) -> np.ndarray:
    """What the root's dst buffer must hold: the one-process call's, which must be the contract's."""
    xs = case_tensors(case, world_size)
    buffer, dst = case_dst(case)
    out = tp.comm.treduce(tp.comm.ParallelGroup(xs, root=case["root"]), dst, backend="cpu", **options(case))
    reference = treduce_reference(xs, case["root"], case.get("op", "sum"), case.get("accumulate"))
    assert bits_equal(out, reference)
    return out if buffer is None else buffer


def suite(world_size: int, transport: str = "cpu") -> list:
    """The one-process suite's kinds of cases: roots, ops, dtypes (and float32 accumulation),
    chunkings, buffering, every algorithm (scatter_gather and chain forced; the chain's float32
    accumulator where the transport carries float32 partials: not nccl), strided sources and dst,
    N-D, empty tensors."""
    seed = itertools.count(world_size * 1000)
    cases = []
    for root, op, (dtype, acc) in itertools.product(
            sorted({0, world_size - 1, world_size // 2}), ("sum", "max", "min"),
            [("float32", None), ("float16", None), ("bfloat16", None), ("int32", None), ("float16", "float32"),
             ("bfloat16", "float32")]):
        cases.append({"seed": next(seed), "shape": [9, 37], "dtype": dtype, "accumulate": acc, "op": op,
                      "root": root, "tile": [4, 16]})
    for shape, tile, valid, pingpong in [([24, 16], [8, 16], "static", False), ([13, 37], [4, 16], "dynamic", True),
                                         ([5, 33], [1, 32], "dynamic", False), ([3, 70], [8, 16], "dynamic", True)]:
        cases.append({"seed": next(seed), "shape": shape, "dtype": "float32", "op": "sum", "root": 1,
                      "tile": tile, "valid": valid, "pingpong": pingpong})
    for src, dst in [("src-every-other-col", "dst-contiguous"), ("src-transposed", "dst-every-other-element"),
                     ("src-offset-every-other-row", "dst-transposed")]:
        cases.append({"seed": next(seed), "shape": [3, 6, 37], "dtype": "float32", "op": "sum", "root": 0,
                      "src": src, "dst": dst})
    cases.append({"seed": next(seed), "shape": [2, 1, 3, 6, 17], "dtype": "float32", "op": "max", "root": 1})
    cases.append({"seed": next(seed), "shape": [0, 16], "dtype": "float32", "op": "sum", "root": 0,
                  "dst": "dst-contiguous"})
    cases.append({"seed": next(seed), "shape": [64, 300], "dtype": "float32", "op": "sum", "root": 0,
                  "dst": "dst-contiguous"})  # in place of a smaller earlier buffer: the shared buffer grows
    for dst in ["dst-contiguous", "dst-contiguous", None, None, "dst-contiguous"]:
        # a call repeated with the same layouts (the root reuses its checks) on fresh tensors and dst
        cases.append({"seed": next(seed), "shape": [7, 45], "dtype": "float32", "op": "sum", "root": world_size - 1,
                      "dst": dst})
    if world_size >= 3:
        cases.append({"seed": next(seed), "shape": [16, 48], "dtype": "float32", "op": "sum", "root": 2,
                      "dispatch": "scatter_gather"})
    accumulate = None if transport.startswith("nccl") else "float32"
    for root, (dtype, acc) in [(world_size - 1, ("float32", None)), (0, ("bfloat16", accumulate))]:
        cases.append({"seed": next(seed), "shape": [13, 37], "dtype": dtype, "accumulate": acc, "op": "sum",
                      "root": root, "dispatch": "chain"})
    return cases


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_every_rank_gets_the_one_process_bits_at_the_root_and_none_elsewhere(world_size, tmp_path):
    cases = suite(world_size)
    records = launch(cases, world_size, tmp_path)
    for r, record in enumerate(records):
        assert isinstance(record, list) and len(record) == len(cases), f"rank {r}: {record}"
    for i, case in enumerate(cases):  # scatter_gather forced too: the root's process runs every shard
        root = case["root"]
        for r in range(world_size):
            assert records[r][i] == ("dst" if r == root else "none"), (i, case, r, records[r][i])
        expected = one_process(case, world_size)
        assert bits_equal(saved_result(tmp_path, i, case, expected.shape), expected), (i, case)


GPU_TRANSPORTS = ["cuda_ipc", "nccl", "nccl-hosts"]  # nccl-hosts: every rank on a host of its own, as it claims


def gpus_for(transport: str, world_size: int):
    """The worker puts rank r on GPU r mod the GPUs there are: CUDA IPC and ranks on hosts of their
    own run on any number of them, NCCL takes a GPU per rank on one host."""
    return pytest.mark.multi_gpu(world_size if transport == "nccl" else 1)


GPU_RUNS = [pytest.param(n, transport, marks=gpus_for(transport, n), id=f"{n}-{transport}")
            for transport in GPU_TRANSPORTS for n in (2, 4)]
TRANSPORTS_OF_2 = [pytest.param(transport, marks=gpus_for(transport, 2), id=transport) for transport in GPU_TRANSPORTS]


@pytest.mark.gpu
@pytest.mark.parametrize("world_size,transport", GPU_RUNS)
def test_gpu_transports_give_the_cpu_bits_at_the_root_and_none_elsewhere(world_size, transport, tmp_path):
    pytest.importorskip("torch")
    cases = suite(world_size, transport)
    check_gpu_records(cases, world_size, launch(cases, world_size, tmp_path, transport=transport), tmp_path)


def apart_suite(world_size: int, transport: str = "cuda_ipc") -> list:
    """Calls whose ranks work apart (scatter_gather: each non-root rank reduces a shard on its own
    GPU, into the root's dst under cuda_ipc, sent to the root under nccl; chain: every rank its step,
    the partial pushed into the next rank's staging under cuda_ipc, sent on under nccl), forced or
    chosen for a large message, between root_pull calls on the same communicator."""
    seed = itertools.count(world_size * 5000)
    cases = chain_cases(world_size, transport, seed)
    for root, (dtype, acc, op) in itertools.product(
            sorted({0, world_size - 1}), [("float32", None, "sum"), ("bfloat16", "float32", "max"),
                                          ("int32", None, "min"), ("float16", None, "sum")]):
        cases.append({"seed": next(seed), "shape": [16, 48], "dtype": dtype, "accumulate": acc, "op": op,
                      "root": root, "tile": [4, 16], "dispatch": "scatter_gather", "variant": "scatter_gather"})
    for shape, tile, pingpong in [([13, 37], [4, 16], True), ([5, 33], [1, 32], False)]:
        cases.append({"seed": next(seed), "shape": shape, "dtype": "float32", "op": "sum", "root": 1, "tile": tile,
                      "pingpong": pingpong, "dispatch": "scatter_gather"})
    for src, dst in [("src-every-other-col", "dst-transposed"), ("src-transposed", "dst-every-other-element")]:
        cases.append({"seed": next(seed), "shape": [3, 6, 37], "dtype": "float32", "op": "sum", "root": 0,
                      "src": src, "dst": dst, "dispatch": "scatter_gather"})
    cases.append({"seed": next(seed), "shape": [0, 16], "dtype": "float32", "op": "sum", "root": 0,
                  "dst": "dst-contiguous", "dispatch": "scatter_gather"})
    large = {"shape": [520, 640], "dtype": "float32", "op": "sum", "root": 1, "dispatch": "scatter_gather",
             "variant": "scatter_gather"}  # 1.3 MB, several pieces per shard
    for dst in [None, "dst-contiguous", None]:  # repeated: the root re-tells where each call's dst lies
        cases.append({**large, "seed": next(seed), "dst": dst})
        cases.append({"seed": next(seed), "shape": [9, 37], "dtype": "float32", "op": "sum", "root": 0,
                      "variant": "root_pull"})
    return cases


def chain_cases(world_size: int, transport: str, seed) -> list:
    """The chain forced: roots at either end, every op, 16-bit dtypes (a float32 accumulator where
    the transport carries float32 partials: not nccl), partial steps, strided sources and dst, an
    empty tensor, a call repeated with fresh dst."""
    cases = []
    accumulate = None if transport.startswith("nccl") else "float32"
    for root, (dtype, acc, op) in itertools.product(
            sorted({0, world_size - 1}), [("float32", None, "sum"), ("bfloat16", accumulate, "max"),
                                          ("int32", None, "min"), ("float16", None, "sum")]):
        cases.append({"seed": next(seed), "shape": [16, 48], "dtype": dtype, "accumulate": acc, "op": op,
                      "root": root, "tile": [4, 16], "dispatch": "chain", "variant": "chain"})
    cases.append({"seed": next(seed), "shape": [3, 20011], "dtype": "float32", "op": "sum", "root": 1,
                  "dispatch": "chain"})
    for src, dst in [("src-every-other-col", "dst-transposed"), ("src-transposed", "dst-every-other-element")]:
        cases.append({"seed": next(seed), "shape": [3, 6, 37], "dtype": "float32", "op": "sum", "root": 0,
                      "src": src, "dst": dst, "dispatch": "chain"})
    cases.append({"seed": next(seed), "shape": [0, 16], "dtype": "float32", "op": "sum", "root": 0,
                  "dst": "dst-contiguous", "dispatch": "chain"})
    for dst in [None, "dst-contiguous"]:
        cases.append({"seed": next(seed), "shape": [64, 700], "dtype": "float32", "op": "sum", "root": 1,
                      "dst": dst, "dispatch": "chain"})
    return cases


@pytest.mark.gpu
@pytest.mark.multi_gpu(1)
@pytest.mark.parametrize("world_size", [3, 4])
def test_cuda_ipc_ranks_that_work_apart_give_the_cpu_bits(world_size, tmp_path):
    """3 and 4 processes on the GPUs there are (some share a GPU where there are fewer GPUs)."""
    pytest.importorskip("torch")
    cases = apart_suite(world_size)
    check_gpu_records(cases, world_size, launch(cases, world_size, tmp_path, transport="cuda_ipc"), tmp_path)


@pytest.mark.gpu
@pytest.mark.multi_gpu(1)
def test_a_cuda_ipc_chain_gives_the_cpu_bits(tmp_path):
    """The chain alone on 3 ranks (what on_gpu.sh's sanitizers run, every rank under the tool)."""
    pytest.importorskip("torch")
    cases = chain_cases(3, "cuda_ipc", itertools.count(9000))
    check_gpu_records(cases, 3, launch(cases, 3, tmp_path, transport="cuda_ipc"), tmp_path)


@pytest.mark.gpu
@pytest.mark.multi_gpu(1)
@pytest.mark.parametrize("world_size", [3, 4])
def test_nccl_ranks_that_work_apart_give_the_cpu_bits(world_size, tmp_path):
    """Every rank on a host of its own (so they may share the GPUs there are): each worker gets
    its shard's slices from every rank, folds them and sends the root the result."""
    pytest.importorskip("torch")
    cases = apart_suite(world_size, "nccl-hosts")
    cases.append({"seed": 7, "shape": [3, 1000, 1037], "dtype": "bfloat16", "accumulate": "float32", "op": "sum",
                  "root": world_size - 1, "dispatch": "scatter_gather"})  # several steps of every shard
    cases.append({"seed": 8, "shape": [3, 1000, 1037], "dtype": "bfloat16", "op": "sum", "root": 1,
                  "dispatch": "chain"})  # several chunks of the chain
    check_gpu_records(cases, world_size, launch(cases, world_size, tmp_path, transport="nccl-hosts"), tmp_path)


@pytest.mark.gpu
@pytest.mark.parametrize("transport", TRANSPORTS_OF_2)
def test_under_torchrun_the_ranks_meet_through_its_process_group(transport, tmp_path):
    pytest.importorskip("torch")
    cases = suite(2, transport)[:4] + [c for c in suite(2) if c.get("src")][:2]  # strided sources and dst among them
    check_gpu_records(cases, 2, launch(cases, 2, tmp_path, transport=transport, torchrun=True), tmp_path)


@pytest.mark.gpu
@pytest.mark.multi_gpu(1)
def test_a_cuda_ipc_rank_whose_share_fails_raises_and_holds_up_no_gpu(tmp_path):
    """Rank 2 cannot run its shard of a scatter_gather call: it raises, says "ready" and "done"
    for itself from the host, so the root's and rank 1's GPUs go on at once (no trap at the
    timeout), and the next call gives the CPU bits."""
    pytest.importorskip("torch")
    base = {"shape": [520, 640], "dtype": "float32", "op": "sum", "root": 0, "timeout": 20,
            "dispatch": "scatter_gather", "variant": "scatter_gather"}
    cases = [{**base, "seed": 1}, {**base, "seed": 2, "role": {"2": "share-fails"}}, {**base, "seed": 3}]
    started = time.monotonic()
    records = launch(cases, 3, tmp_path, transport="cuda_ipc", deadline=90)
    assert time.monotonic() - started < 60, "no GPU waited for its timeout"
    check_rank_2_failed_the_middle_call(cases, records, tmp_path)


@pytest.mark.gpu
@pytest.mark.multi_gpu(1)
def test_an_nccl_worker_whose_fold_fails_raises_and_the_root_gets_all_ones_for_its_shard(tmp_path):
    """Ranks on hosts of their own; rank 2's folds of its shard fail at the second call: it
    raises, its exchange goes on (so no rank waits), and the root's dst holds the CPU bits but for
    rank 2's shard, all-ones bytes (NaN); the next call gives the CPU bits."""
    pytest.importorskip("torch")
    from tileprim.comm.transports.nccl import _shards
    base = {"shape": [520, 640], "dtype": "float32", "op": "sum", "root": 0, "dispatch": "scatter_gather",
            "variant": "scatter_gather"}
    cases = [{**base, "seed": 1}, {**base, "seed": 2, "role": {"2": "fold-fails"}}, {**base, "seed": 3}]
    records = launch(cases, 3, tmp_path, transport="nccl-hosts", deadline=120)
    check_rank_2_failed_the_middle_call(cases, records, tmp_path)
    expected = one_process(cases[1], 3).reshape(-1)
    got = saved_result(tmp_path, 1, cases[1], expected.shape)
    rank_2_from = _shards(expected.nbytes, 3, 0)[0][1] // expected.itemsize  # rank 1's shard, then rank 2's
    assert 0 < rank_2_from < expected.size
    assert bits_equal(got[:rank_2_from], expected[:rank_2_from])
    assert (got[rank_2_from:].view(np.uint32) == 0xFFFFFFFF).all()


@pytest.mark.gpu
@pytest.mark.multi_gpu(1)
@pytest.mark.parametrize("world_size,failing,variant", [(2, 0, "root_pull"), (3, 2, "scatter_gather")],
                         ids=["root-receiving", "worker-of-a-shard"])
def test_an_nccl_rank_that_cannot_enqueue_its_part_breaks_the_communicator_on_every_rank(world_size, failing,
                                                                                          variant, tmp_path):
    """Ranks on hosts of their own; at the second call one rank's NCCL staging cannot be allocated
    (TILEPRIM_INJECT_FAULT=nccl_staging, compiled into every build): the root as it receives
    (root_pull), or a worker as it takes in its shard's slices (scatter_gather). That rank raises
    at once and aborts its NCCL communicator; every other rank's transfer then fails or outlives
    its timeout, its watchdog aborts NCCL, and from then on every rank's call says the
    communicator is broken (none hangs)."""
    pytest.importorskip("torch")
    small = {"shape": [64, 300], "dtype": "float32", "op": "sum", "root": 0, "timeout": 10,
             "dispatch": "root_pull"}
    large = {**small, "shape": [128, 1000], "dispatch": variant}  # more staging than call 1's: it grows
    cases = [{**small, "seed": 1}, {**large, "seed": 2, "role": {str(failing): "staging-fails"}},
             {**small, "seed": 3}, {**small, "seed": 4}]
    started = time.monotonic()
    records = launch(cases, world_size, tmp_path, transport="nccl-hosts", deadline=150)
    assert time.monotonic() - started < 120, "a rank waited past its watchdog"
    for r in range(world_size):
        assert isinstance(records[r], list) and len(records[r]) == 4, records[r]
        assert records[r][0] == ("dst" if r == 0 else "none"), records[r]
        assert records[r][2].startswith("error Comm"), records[r]  # broken, or timed out waiting for a broken rank
        assert records[r][3].startswith("error CommError: the communicator is broken"), records[r]
    assert records[failing][1].startswith("error") and "injected failure (TILEPRIM_INJECT_FAULT=nccl_staging)" in \
        records[failing][1] and "NCCL communicator was aborted" in records[failing][1], records[failing]
    expected = one_process(cases[0], world_size)
    assert bits_equal(saved_result(tmp_path, 0, cases[0], expected.shape), expected)


@pytest.mark.gpu
@pytest.mark.multi_gpu(4)
@pytest.mark.parametrize("transport", ["cuda_ipc", "nccl"])
def test_a_large_call_on_four_gpus_takes_the_chain_and_gives_the_cpu_bits(transport, tmp_path):
    """A GPU per rank: 64 MiB per rank is the chain's (the cost model's choice on every rank), repeated."""
    pytest.importorskip("torch")
    large = {"shape": [4096, 4096], "dtype": "float32", "op": "sum", "root": 2, "variant": "chain"}
    cases = [{**large, "seed": 1}, {**large, "seed": 2, "dst": "dst-contiguous"},
             {"seed": 3, "shape": [9, 37], "dtype": "float32", "op": "sum", "root": 0, "variant": "root_pull"}]
    check_gpu_records(cases, 4, launch(cases, 4, tmp_path, transport=transport, deadline=300), tmp_path)


def eight_suite() -> list:
    """Every algorithm with 8 ranks: the chain's 8 hops, scatter_gather's 7 shards, root_pull."""
    seed = itertools.count(8000)
    cases = []
    for dispatch, root in itertools.product(["chain", "scatter_gather", "root_pull"], [0, 5]):
        cases.append({"seed": next(seed), "shape": [13, 300], "dtype": "float32", "op": "sum", "root": root,
                      "dispatch": dispatch, "variant": dispatch})
    cases.append({"seed": next(seed), "shape": [3, 6, 37], "dtype": "bfloat16", "op": "max", "root": 7,
                  "src": "src-transposed", "dst": "dst-every-other-element", "dispatch": "chain"})
    return cases


def test_eight_cpu_processes_give_the_one_process_bits(tmp_path):
    cases = eight_suite()
    records = launch(cases, 8, tmp_path)
    for r, record in enumerate(records):
        assert isinstance(record, list) and len(record) == len(cases), f"rank {r}: {record}"
    for i, case in enumerate(cases):
        assert [records[r][i] for r in range(8)] == ["dst" if r == case["root"] else "none" for r in range(8)], i
        expected = one_process(case, 8)
        assert bits_equal(saved_result(tmp_path, i, case, expected.shape), expected), (i, case)


@pytest.mark.gpu
@pytest.mark.multi_gpu(1)
@pytest.mark.parametrize("transport", ["cuda_ipc", "nccl-hosts"])
def test_eight_processes_on_the_gpus_there_are_give_the_cpu_bits(transport, tmp_path):
    """8 ranks, rank r on GPU r mod the GPUs there are (two to a GPU on 4): the orchestration of
    every algorithm at world 8 (NCCL: every rank on a host of its own, so ranks may share a GPU)."""
    pytest.importorskip("torch")
    cases = eight_suite()
    check_gpu_records(cases, 8, launch(cases, 8, tmp_path, transport=transport, deadline=400), tmp_path)


def check_rank_2_failed_the_middle_call(cases, records, tmp_path) -> None:
    """Of three calls on 3 ranks, rank 2 raised the injected error at the second, which the root
    returned from, and the first and the last gave the CPU bits."""
    assert records[2][1].startswith("error RuntimeError: injected"), records[2]
    assert [records[0][1], records[1][1]] == ["dst", "none"], records
    for i in (0, 2):
        assert [records[r][i] for r in range(3)] == ["dst", "none", "none"], records
        expected = one_process(cases[i], 3)
        assert bits_equal(saved_result(tmp_path, i, cases[i], expected.shape), expected)


def check_gpu_records(cases, world_size, records, tmp_path) -> None:
    for r, record in enumerate(records):
        assert isinstance(record, list) and len(record) == len(cases), f"rank {r}: {record}"
    for i, case in enumerate(cases):
        root = case["root"]
        for r in range(world_size):
            assert records[r][i] == ("dst" if r == root else "none"), (i, case, r, records[r][i])
        expected = one_process(case, world_size)
        assert bits_equal(saved_result(tmp_path, i, case, expected.shape), expected), (i, case)


def test_ranks_that_disagree_or_fail_locally_raise_the_same_error_everywhere_and_go_on(tmp_path):
    base = {"shape": [9, 37], "dtype": "float32", "op": "sum", "root": 0}
    cases = [{**base, "seed": 1, "role": {"2": "other-shape"}},
             {**base, "seed": 2, "root": 1, "role": {"0": "float64"}},
             {**base, "seed": 3, "dst": "dst-contiguous"}]  # the communicator still works
    records = launch(cases, 3, tmp_path)
    for r in range(3):
        assert records[r][0].startswith("error ValueError: the ranks called differently"), records[r][0]
        assert "rank 2: treduce(op='sum', float32 (9, 36)" in records[r][0]
        # rank 0's own TypeError: every rank raises one error that is a ValueError and a TypeError
        assert records[r][1].startswith("error CallTypeError: rank 0: x: dtype float64"), records[r][1]
        assert records[r][:2] == records[0][:2], "the same errors on every rank"
    assert issubclass(tp.comm.CallTypeError, ValueError) and issubclass(tp.comm.CallTypeError, TypeError)
    assert [records[r][2] for r in range(3)] == ["dst", "none", "none"]
    expected = one_process(cases[2], 3)
    assert bits_equal(saved_result(tmp_path, 2, cases[2], expected.shape), expected)


@pytest.mark.parametrize("roles", [{"0": "root-1"}, {"1": "root-2"}, {"2": "root-1"}, {"0": "root-2", "1": "root-2"}],
                         ids=["rank0-thinks-1", "rank1-thinks-2", "rank2-thinks-1", "two-think-2"])
def test_ranks_that_disagree_on_the_root_raise_the_same_error_at_once_and_go_on(roles, tmp_path):
    """No rank waits for a judge the others do not know: every rank reads every description."""
    base = {"shape": [9, 37], "dtype": "float32", "op": "sum", "root": 0, "timeout": 60}
    cases = [{**base, "seed": 1, "role": roles}, {**base, "seed": 2, "dst": "dst-contiguous"}]
    started = time.monotonic()
    records = launch(cases, 3, tmp_path)
    assert time.monotonic() - started < 30, "no rank waited for its timeout"
    for r in range(3):
        assert records[r][0].startswith("error ValueError: the ranks called differently"), records[r][0]
        assert records[r][0] == records[0][0], "the same error on every rank"
    assert [records[r][1] for r in range(3)] == ["dst", "none", "none"]
    expected = one_process(cases[1], 3)
    assert bits_equal(saved_result(tmp_path, 1, cases[1], expected.shape), expected)


@pytest.mark.gpu
@pytest.mark.parametrize("transport", TRANSPORTS_OF_2)
def test_gpu_calls_the_ranks_disagree_on_raise_everywhere_and_hold_up_no_later_call(transport, tmp_path):
    """Under cuda_ipc a non-root rank arrives before the root's verdict (its stream then waits for
    the root's "done"): a call the root refuses must end that wait, or the next call queues behind
    it and never runs."""
    pytest.importorskip("torch")
    base = {"shape": [9, 37], "dtype": "float32", "op": "sum", "root": 0}
    cases = [{**base, "seed": 1, "role": {"0": "other-shape"}},  # rank 1 has arrived
             {**base, "seed": 2, "role": {"1": "float64"}},
             {**base, "seed": 3, "dst": "dst-contiguous"}]
    records = launch(cases, 2, tmp_path, transport=transport, deadline=150)
    for r in range(2):
        assert isinstance(records[r], list), records[r]
        assert records[r][0].startswith("error ValueError: the ranks called differently"), records[r][0]
        assert records[r][1].startswith("error") and "float64" in records[r][1], records[r][1]
    assert [records[r][2] for r in range(2)] == ["dst", "none"]
    expected = one_process(cases[2], 2)
    assert bits_equal(saved_result(tmp_path, 2, cases[2], expected.shape), expected)


@pytest.mark.gpu
@pytest.mark.multi_gpu(1)
def test_nccl_ranks_that_share_a_gpu_of_one_host_are_told_why_nccl_refuses_them(tmp_path):
    """One rank more than the GPUs there are, on one host: rank 0 and the last share GPU 0, which
    NCCL refuses ("invalid usage") or, on a host of several GPUs, waits on in its init: every
    rank says so at once, before NCCL starts, naming them, and the next call too."""
    pytest.importorskip("torch")
    n = gpu_count() + 1
    base = {"shape": [9, 37], "dtype": "float32", "op": "sum", "root": 0, "timeout": 60}
    cases = [{**base, "seed": 1}, {**base, "seed": 2}]
    started = time.monotonic()
    records = launch(cases, n, tmp_path, transport="nccl", deadline=120)
    assert time.monotonic() - started < 50, "a rank waited for NCCL's init"
    for r in range(n):
        assert isinstance(records[r], list), records[r]
        first = records[r][0]
        assert first.startswith("error CommError: transport 'nccl': ranks 0 and"), first
        assert "NCCL takes one GPU per rank on a host" in first, first
        assert f"ranks 0 and {n - 1} both use cuda:0 on host" in first, first
        assert records[r][1].startswith("error CommError"), records[r][1]


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
def test_a_rank_that_dies_mid_transfer_is_seen_by_the_nccl_watchdog(tmp_path):
    """The root's call returns once its receives are queued; the sender then dies. The watchdog
    sees the rank's process gone, aborts NCCL (the root's stream goes on: its result is saved)
    and breaks the communicator: the next call says why."""
    pytest.importorskip("torch")
    base = {"shape": [64, 300], "dtype": "float32", "op": "sum", "root": 0}
    cases = [{**base, "seed": 1}, {**base, "seed": 2, "role": {"1": "exit-mid-transfer"}}, {**base, "seed": 3}]
    records = launch(cases, 2, tmp_path, transport="nccl", deadline=150)
    assert records[1]["exit"] == 5, records[1]
    assert records[0][:2] == ["dst", "dst"], records[0]
    assert records[0][2].startswith("error CommError: the communicator is broken: a call's NCCL transfer was "
                                    "abandoned: rank 1 exited"), records[0][2]
    expected = one_process(cases[0], 2)
    assert bits_equal(saved_result(tmp_path, 0, cases[0], expected.shape), expected)


@pytest.mark.gpu
@pytest.mark.multi_gpu(1)
@pytest.mark.parametrize("who", ["root", "non-root"])
def test_a_cuda_ipc_rank_killed_while_the_others_gpus_wait_on_it_holds_none_of_them(who, tmp_path):
    """The root is killed once it accepted the call (rank 1's stream waits for its "done"), or
    rank 1 once it posted its call (the root's kernel waits for its "ready"). The survivor's
    watchdog sees the process gone and abandons the call on its GPU, which goes on at once (no
    trap at the timeout); the next call says why."""
    pytest.importorskip("torch")
    victim = 0 if who == "root" else 1
    base = {"shape": [64, 300], "dtype": "float32", "op": "sum", "root": 0, "timeout": 30}
    role = "killed-after-verdict" if victim == 0 else "killed-after-posting"
    cases = [{**base, "seed": 1}, {**base, "seed": 2, "role": {str(victim): role}}, {**base, "seed": 3}]
    records = launch(cases, 2, tmp_path, transport="cuda_ipc", deadline=60)  # the arrive kernel's limit: 126 s
    survivor = 1 - victim
    assert records[victim]["exit"] == -9, records[victim]
    assert isinstance(records[survivor], list), records[survivor]
    last = records[survivor][2]  # rank 1 may see the root gone in the rendezvous before its watchdog does
    assert last.startswith("error CommError") and f"rank {victim}" in last and "exited" in last, last
    if survivor == 1:
        assert records[1][:2] == ["none", "none"], records[1]
    else:  # the root accepts call 2 and its result is saved once its GPU gave up, unless its watchdog
        # saw rank 1 gone before the root got to call 2 (a loaded host): then call 2 says why
        accepted = records[0][1] == "dst"
        broken = ("error CommError: the communicator is broken: rank 1 exited; this rank's GPU stopped waiting "
                  f"for calls up to {2 if accepted else 1}")
        assert records[0][0] == "dst" and (accepted or records[0][1].startswith(broken)), records[0]
        assert last.startswith(broken), last
    expected = one_process(cases[0], 2)
    assert survivor == 1 or bits_equal(saved_result(tmp_path, 0, cases[0], expected.shape), expected)


@pytest.mark.gpu
@pytest.mark.multi_gpu(1)
def test_a_cuda_ipc_root_waits_on_the_gpu_for_no_longer_than_the_calls_timeout(tmp_path):
    """At the second call rank 1's stream reaches the call BUSY_S after the root's kernel starts
    waiting for it, past the call's 1 s timeout: the root's kernel traps (its process fails at
    the next synchronisation) instead of waiting on; rank 1 then sees the root gone."""
    pytest.importorskip("torch")
    base = {"shape": [64, 300], "dtype": "float32", "op": "sum", "root": 0}
    cases = [{**base, "seed": 1}, {**base, "seed": 2, "timeout": 1, "role": {"1": "busy"}}, {**base, "seed": 3}]
    records = launch(cases, 2, tmp_path, transport="cuda_ipc", deadline=90)
    assert isinstance(records[0], dict) and records[0]["exit"] != 0, records
    assert "CUDA error: unspecified launch failure" in records[0]["log"], records[0]
    assert records[1][:2] == ["none", "none"], records[1]
    assert records[1][2].startswith("error CommError") and "rank 0" in records[1][2], records[1]


def left_in_shared_memory(tmp_path) -> list:
    """What the job (its name saved by rank 0) left in shared memory (the session's: conftest)."""
    job = (tmp_path / "job").read_text()
    return [name for name in os.listdir(os.environ["TILEPRIM_SHM_DIR"]) if name.startswith(f"tileprim-{job}")]


@pytest.mark.parametrize("how", ["exit", "hang"])
def test_a_rank_that_exits_or_hangs_ends_the_call_on_every_other_rank(how, tmp_path):
    base = {"shape": [4, 8], "dtype": "float32", "op": "sum", "root": 0, "timeout": 2}
    cases = [{**base, "seed": 1}, {**base, "seed": 2, "role": {"1": how}}, {**base, "seed": 3}]
    records = launch(cases, 3, tmp_path, deadline=120)
    assert records[0][0] == "dst" and records[2][0] == "none"
    for r in (0, 2):
        expected = "CommTimeout" if how == "hang" else "CommError"
        assert records[r][1].startswith(f"error {expected}") and "rank 1" in records[r][1], records[r][1]
        assert records[r][2].startswith("error CommError: the communicator is broken"), records[r][2]
    assert records[1]["exit"] == (3 if how == "exit" else 4)
    assert left_in_shared_memory(tmp_path) == []


def test_a_rank_that_dies_before_the_root_maps_its_buffer_leaves_nothing_in_shared_memory(tmp_path):
    """Rank 1 posts a call with a new, larger shared buffer and exits; rank 2's call differs, so
    the root never maps rank 1's buffer. The survivors remove it (at the next call, which sees
    rank 1 gone, or at close)."""
    base = {"dtype": "float32", "op": "sum", "root": 0, "timeout": 5}
    cases = [{**base, "shape": [4, 8], "seed": 1},
             {**base, "shape": [64, 300], "seed": 2, "role": {"1": "exit-after-posting", "2": "other-shape"}},
             {**base, "shape": [4, 8], "seed": 3}]
    records = launch(cases, 3, tmp_path, deadline=120)
    assert records[1]["exit"] == 6, records[1]
    for r in (0, 2):
        assert records[r][0] == ("dst" if r == 0 else "none"), records[r]
        assert records[r][1].startswith("error ValueError: the ranks called differently"), records[r]
        assert records[r][2].startswith("error CommError") and "rank 1" in records[r][2], records[r]
    assert left_in_shared_memory(tmp_path) == []


def test_the_cpu_backend_across_hosts_is_refused_on_every_rank(tmp_path):
    records = launch([], 2, tmp_path, deadline=60, transport="cpu-hosts")
    for record in records:
        assert record["exit"] != 0 and "CommError: backend: the ranks run on 2 hosts" in record["log"], record


def test_one_process_is_a_world_of_one_and_plans_name_the_transport(rng):
    comm = tp.comm.init(backend="cpu")
    try:
        x = rng.standard_normal((5, 7)).astype(np.float32)
        g = tp.comm.ParallelGroup.distributed(x, root=0, comm=comm)
        dst = poisoned(x.shape, "float32")
        assert tp.comm.treduce(g, dst) is dst and bits_equal(dst, x)
        plan = tp.plan(tp.comm.treduce, g, op="max")
        assert plan.variant == "root_pull" and "shared memory between processes" in plan.params["transport"]
        assert (comm.rank, comm.world_size, comm.transport) == (0, 1, "shm")
    finally:
        comm.close()
    with pytest.raises(tp.comm.CommError, match="closed"):
        tp.comm.treduce(g)


@pytest.mark.parametrize("kwargs,error,match", [
    ({"rank": 2, "world_size": 2}, ValueError, r"rank: 2 is not in 0 \.\. 1"),
    ({"rank": 0, "world_size": 0}, ValueError, "world_size: 0 < 1"),
    ({"rank": "0", "world_size": 2}, TypeError, "rank: expected an int"),
    ({"rank": 1, "world_size": 3}, ValueError, "init_file: the ranks need a way to meet"),
    ({"timeout": -1}, ValueError, "timeout: -1 is not a positive"),
    ({"device": 0}, ValueError, "device: only the cuda backend"),
    ({"rank": 0, "world_size": 2, "init_file": "/nonexistent-tileprim-dir/init"}, ValueError,
     "init_file: .* its directory /nonexistent-tileprim-dir does not exist"),
    ({"rank": 0, "world_size": 2, "init_file": 5}, TypeError, "init_file: expected a path"),
])
def test_bad_init_arguments_name_the_argument(kwargs, error, match):
    with pytest.raises(error, match=match):
        tp.comm.init(backend="cpu", **kwargs)


def test_a_rank_that_never_comes_times_out_at_init(tmp_path):
    with pytest.raises(tp.comm.CommTimeout, match="rank 1"):
        tp.comm.init(backend="cpu", rank=0, world_size=2, init_file=tmp_path / "init", timeout=0.5)
