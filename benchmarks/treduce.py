"""tp.comm.treduce beside torch.distributed.reduce (NCCL) and a plain peer copy, on 2, 4 and 8 GPUs.

For each GPU count and size (bytes per rank, float32, 4 KiB ... 1 GiB), root 0:
  - tileprim, one process holding every rank's tensor (rank r on cuda:r): each algorithm that applies
    (root_pull; scatter_gather from 3 ranks; chain) forced with dispatch=, and "auto" (what dispatch
    picks, with the cost model's estimates in the JSON);
  - NCCL: torch.distributed.reduce to rank 0, one process per GPU, NVLink multicast off;
  - peer copy: dst.copy_(src) from cuda:1 to cuda:0, the link's ceiling;
  - with --distributed, one process per GPU (tp.comm.init over the torch.distributed group), every
    rank calling treduce, timed on the root like NCCL, for each --transport (cuda_ipc, nccl; series
    "cuda_ipc" and "nccl-tr"), automatic dispatch (JSON "variant") and each --dispatch algorithm forced
    ("cuda_ipc:chain", ...); under nccl each point also records where the root's host time went
    ("nccl_host_us": NCCL groups, folds); with --verify, the root's result equal bit for bit to the
    CPU backend's. --network forces NCCL onto its network transport (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1:
    sockets between the processes of one host, the stand-in for two hosts) for torch's NCCL and
    tileprim's alike, and runs only those series. --hosts goes further: every process claims a host
    of its own (NCCL_HOSTID and TILEPRIM_HOST_ID), so NCCL and tileprim take their between-hosts paths,
    and the processes may share the GPUs there are (process r on GPU r mod their count): a stand-in for
    N hosts, where the GPUs' time is sliced between the processes, so read its figures as ratios.
A point: warm-up, then batches of back-to-back calls between two CUDA events on the root's current
stream, every GPU idle before each batch (NCCL: a barrier); latency = the median batch / calls,
algbw = bytes per rank / latency. Issued back to back, a call costs the larger of its host time and
its GPU time, so for small messages "latency" is mostly the host's issuing (torch's own peer copy
of 4 KiB: ~14 us). Every series is also timed with the host's issuing hidden (gpu_us): each GPU's
stream held by a spin kernel while the host issues the batch (its issue time per call: host_us),
then the batch run back to back, the events after the spin; NCCL's, the peer copy's and every
transport's alike. wall_us (JSON) is host time per call with every GPU synchronised, a check that
no work escaped the events. Each series runs in its own process under a deadline, so a crash or
hang loses that series only; a failed point is reported and the run goes on. The issue's targets
(set for H200s) are judged at the end, on automatic dispatch, each latency target on both figures.

    python benchmarks/treduce.py [--gpus 2,4,8] [--sizes 4K,64K,16M,1G] [--json PATH] [--verify] [--distributed]
                                 [--transport cuda_ipc,nccl] [--dispatch chain,root_pull] [--network] [--hosts]
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import socket
import statistics
import sys
import tempfile
import time
import traceback
from datetime import timedelta

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
DEFAULT_SIZES = [4 * KiB * 4 ** i for i in range(10)]  # 4 KiB, 16 KiB ... 1 GiB
VERIFY_SIZES = [64 * KiB, 1 * MiB]
WARMUP = 3            # the first call also compiles
BATCHES = int(os.environ.get("TREDUCE_BENCH_BATCHES", "5"))  # --batches; the series' processes read it
GPU_BATCHES = 3       # batches timed with the host's issuing hidden behind a held stream
BATCH_BYTES = 256 * MiB   # calls per batch: enough to dwarf event overhead, few at large sizes
MIN_CALLS = 10  # ... but enough that the batch's start (the ranks leave a barrier apart) is not a third of it
MAX_CALLS = 200
# Targets, set for H200s: (GPU counts, series, what, the sizes it covers, kind, bound). kind "ratio": algbw
# >= bound x NCCL's; "us": latency <= bound; "nccl_us": latency <= bound x NCCL's; "best": latency <= bound
# x the best forced algorithm's (or auto took that algorithm). Latency targets are judged twice: on calls
# issued back to back (host included), and on GPU time with the host's issuing hidden ("gpu").
TARGETS = [((2, 4, 8), "auto", "algbw >= 1.0x NCCL at >= 16 MiB", lambda b: b >= 16 * MiB, "ratio", 1.0),
           ((2, 4, 8), "cuda_ipc", "algbw >= 1.0x NCCL at >= 16 MiB", lambda b: b >= 16 * MiB, "ratio", 1.0),
           ((2, 4, 8), "nccl-tr", "algbw >= 0.9x NCCL at >= 16 MiB", lambda b: b >= 16 * MiB, "ratio", 0.9),
           ((2, 4), "auto", "latency <= 10 us at <= 64 KiB", lambda b: b <= 64 * KiB, "us", 10.0),
           ((8,), "auto", "latency <= 15 us at <= 64 KiB", lambda b: b <= 64 * KiB, "us", 15.0),
           ((2, 4, 8), "cuda_ipc", "latency <= 15 us at <= 64 KiB", lambda b: b <= 64 * KiB, "us", 15.0),
           ((2, 4, 8), "nccl-tr", "latency <= 1.5x NCCL's at 4-64 KiB", lambda b: 4 * KiB <= b <= 64 * KiB,
            "nccl_us", 1.5),
           ((2, 4, 8), "auto", "auto within 5% of the best forced algorithm", lambda b: True, "best", 1.05)]
TRANSPORT_SERIES = {"cuda_ipc": "cuda_ipc", "nccl": "nccl-tr"}  # --distributed's series, by transport


def algorithms(ngpus: int) -> list:
    return ["root_pull"] + (["scatter_gather"] if ngpus >= 3 else []) + ["chain"]


def shape_for(nbytes: int) -> tuple:
    """float32 rows x cols: rows of up to 4096 elements."""
    n = nbytes // 4
    cols = n if n <= 4096 else next(c for c in range(4096, 0, -1) if n % c == 0)
    return (n // cols, cols)


def schedule(nbytes: int) -> tuple:
    return max(MIN_CALLS, min(MAX_CALLS, BATCH_BYTES // nbytes)), BATCHES


def human(nbytes: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= size and nbytes % size == 0:
            return f"{nbytes // size} {unit}"
    return f"{nbytes} B"


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not m or int(m.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4096, 4K, 64KiB, 16M, 1G)")
    n = int(m.group(1)) * {"": 1, "K": KiB, "M": MiB, "G": GiB}[m.group(2).upper()]
    if n % 4:
        raise argparse.ArgumentTypeError(f"{text}: not a whole number of float32 elements")
    return n


def int_list(text: str) -> list:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, not {text!r}") from None
    if any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, not {text!r}")
    return values


# ---- timing (in the measuring processes) -----------------------------------------------------------------
def sync(torch, devices) -> None:
    for d in devices:
        torch.cuda.synchronize(d)


def timed(torch, fn, nbytes: int, root: int, devices, before_batch=None) -> dict:
    calls, batches = schedule(nbytes)
    before_batch = before_batch or (lambda: sync(torch, devices))
    for _ in range(WARMUP):
        fn()
    sync(torch, devices)
    stream = torch.cuda.current_stream(root)
    per_call, wall = [], []
    for _ in range(batches):
        before_batch()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record(stream)
        for _ in range(calls):
            fn()
        end.record(stream)
        end.synchronize()
        sync(torch, devices)
        wall.append((time.perf_counter() - t0) * 1e6 / calls)
        per_call.append(start.elapsed_time(end) * 1e3 / calls)
    latency = statistics.median(per_call)
    point = {"latency_us": latency, "algbw_gbps": nbytes / latency / 1e3, "calls": calls, "batches": batches,
             "batch_us": per_call, "wall_us": statistics.median(wall)}
    point.update(gpu_timed(torch, fn, calls, root, devices, before_batch, point["wall_us"]))
    return point


_SPIN_CYCLES_PER_US = {}


def spin_cycles_per_us(torch, device: int) -> float:
    """torch.cuda._sleep's cycles per microsecond on `device`, measured once."""
    if device not in _SPIN_CYCLES_PER_US:
        with torch.cuda.device(device):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(10 ** 7)
            end.record()
            end.synchronize()
            _SPIN_CYCLES_PER_US[device] = 10 ** 7 / (start.elapsed_time(end) * 1e3)
    return _SPIN_CYCLES_PER_US[device]


def gpu_timed(torch, fn, calls: int, root: int, devices, before_batch, host_hint_us: float) -> dict:
    """GPU time per call with the host's issuing hidden: every device's current stream held by a
    spin kernel while the host issues `calls` calls (host_us: its time per call), then the batch
    runs back to back between events recorded after the spin. A batch whose issuing outlasted the
    spin (the host waited on a GPU, or was slower than guessed) is not counted, and the next spins
    four times longer; every batch issues the same calls (the ranks of a collective pair up)."""
    stream = torch.cuda.current_stream(root)
    per_call, issue = [], []
    hold_us = 3.0 * calls * host_hint_us + 2000
    for _ in range(GPU_BATCHES):
        before_batch()
        for d in devices:
            with torch.cuda.device(d):
                torch.cuda._sleep(int(hold_us * spin_cycles_per_us(torch, d)))
        held = torch.cuda.Event()
        held.record(stream)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        issued = time.perf_counter() - t0
        end.record(stream)
        still_held = not held.query()
        end.synchronize()
        sync(torch, devices)
        if still_held:
            per_call.append(start.elapsed_time(end) * 1e3 / calls)
            issue.append(issued * 1e6 / calls)
        else:
            hold_us *= 4
    if not per_call:
        return {"gpu_us": None, "host_us": None}
    return {"gpu_us": statistics.median(per_call), "host_us": statistics.median(issue), "gpu_batch_us": per_call}


def last_line(text: str) -> str:
    """A traceback's last line: the error itself."""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else text


def guarded(records: list, path, point: dict, measure) -> None:
    """Add point, filled in by measure() or with its error, and save the records so far (path None:
    keep them)."""
    try:
        point.update(measure())
    except Exception as e:  # noqa: BLE001 - any failure is one point's result
        point["error"] = f"{type(e).__name__}: {e}".strip()[:2000]
        print(f"  {point['series']} {point['gpus']} GPUs {human(point['bytes'])}: {point['error'][:300]}",
              file=sys.stderr, flush=True)
    records.append(point)
    if path is None:
        return
    with open(path + ".tmp", "w") as f:  # whole files only: the process may be killed at any time
        json.dump(records, f)
    os.replace(path + ".tmp", path)


# ---- the measuring processes: spawn targets (index, result path, ...) ------------------------------------
def peer_copy_process(_, path, sizes):
    import torch
    records = []
    for nbytes in sizes:
        def measure():
            src = torch.randn(nbytes // 4, device="cuda:1")
            dst = torch.empty(nbytes // 4, device="cuda:0")
            return timed(torch, lambda: dst.copy_(src), nbytes, 0, [0, 1])
        guarded(records, path, {"series": "peer_copy", "gpus": 2, "bytes": nbytes}, measure)


def tileprim_process(_, path, ngpus, sizes, tile, pingpong):
    import torch
    import tileprim as tp
    records = []
    devices = list(range(ngpus))
    for nbytes in sizes:
        shape = shape_for(nbytes)
        for dispatch in algorithms(ngpus) + [None]:
            kwargs = dict(op="sum", tile=tile, pingpong=pingpong, dispatch=dispatch)

            def measure():
                xs = [torch.randn(shape, device=f"cuda:{r}") for r in devices]
                dst = torch.empty(shape, device="cuda:0")
                group = tp.comm.ParallelGroup(xs, root=0)
                plan = tp.plan(tp.comm.treduce, group, dst, **kwargs)
                point = timed(torch, lambda: tp.comm.treduce(group, dst, **kwargs), nbytes, 0, devices)
                return dict(point, variant=plan.variant, plan=plain(plan.params))
            guarded(records, path, {"series": dispatch or "auto", "gpus": ngpus, "bytes": nbytes,
                                    "shape": list(shape)}, measure)


def plain(params: dict) -> dict:
    return {k: v if isinstance(v, (int, float, str, bool)) else str(v) for k, v in params.items()}


def join_process_group(rank: int, ngpus: int, port: int):
    """This process in an NCCL group of one process per GPU (--hosts: per host it claims): a
    barrier that also idles this process's GPU, and that GPU."""
    import torch
    import torch.distributed as dist
    if os.environ.get("TREDUCE_BENCH_HOSTS"):
        os.environ["NCCL_HOSTID"] = os.environ["TILEPRIM_HOST_ID"] = f"host-{rank}"
    gpu = rank % torch.cuda.device_count()  # its own GPU, or (--hosts) one it shares
    torch.cuda.set_device(gpu)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ngpus,
                            timeout=timedelta(seconds=120), device_id=torch.device("cuda", gpu))

    def barrier():
        dist.barrier(device_ids=[gpu])
        torch.cuda.synchronize(gpu)
    return barrier, gpu


def nccl_process(rank, path, ngpus, sizes, port):
    import torch
    import torch.distributed as dist
    barrier, gpu = join_process_group(rank, ngpus, port)
    records = []
    for nbytes in sizes:
        def measure():
            x = torch.randn(nbytes // 4, device=f"cuda:{gpu}")
            return timed(torch, lambda: dist.reduce(x, dst=0, op=dist.ReduceOp.SUM), nbytes, gpu, [gpu],
                         before_batch=barrier)
        # every rank measures (the collectives pair up); rank 0's numbers are the root's
        point = {"series": "nccl", "gpus": ngpus, "bytes": nbytes}
        guarded(records, path if rank == 0 else None, point, measure)
    dist.destroy_process_group()


def distributed_process(rank, path, ngpus, sizes, port, tile, pingpong, verify, transport, dispatch):
    """tileprim with one process per GPU: every rank calls treduce; rank 0's numbers are the root's."""
    import numpy as np
    import torch
    import torch.distributed as dist
    import tileprim as tp
    barrier, gpu = join_process_group(rank, ngpus, port)
    comm = tp.comm.init(backend="cuda", device=gpu, transport=transport)  # meets through torch.distributed
    series = TRANSPORT_SERIES[transport] + (f":{dispatch}" if dispatch else "")
    records = []
    for nbytes in sizes:
        def measure():
            shape = shape_for(nbytes)
            x = torch.randn(shape, device=f"cuda:{gpu}")
            dst = torch.empty(shape, device="cuda:0") if rank == 0 else None
            group = tp.comm.ParallelGroup.distributed(x, root=0, comm=comm)
            kwargs = dict(tile=tile, pingpong=pingpong, dispatch=dispatch)
            plan = tp.plan(tp.comm.treduce, group, dst, **kwargs)
            host = host_timings(comm)  # read now: from here on, the timed calls' only
            point = timed(torch, lambda: tp.comm.treduce(group, dst, **kwargs), nbytes, gpu, [gpu],
                          before_batch=barrier)
            point.update(variant=plan.variant, estimates=plan.params.get("estimates", ""))
            host = host_timings(comm)
            if host:  # seconds over every call since the last read: microseconds per call
                calls = host.get("calls") or 1
                point["nccl_host_us"] = {k: round(v / calls * 1e6, 1) for k, v in host.items()
                                         if k in ("enqueue", "fold")}
                point["nccl_host_us"].update(groups_per_call=host.get("groups", 0) / calls)
            return point
        guarded(records, path if rank == 0 else None, {"series": series, "gpus": ngpus, "bytes": nbytes}, measure)
    for nbytes in VERIFY_SIZES if verify else []:
        def check():
            xs = [np.random.default_rng([nbytes, r]).standard_normal(shape_for(nbytes)).astype(np.float32)
                  for r in range(ngpus)]
            group = tp.comm.ParallelGroup.distributed(torch.from_numpy(xs[rank]).cuda(gpu), root=0, comm=comm)
            out = tp.comm.treduce(group, tile=tile, pingpong=pingpong, dispatch=dispatch)
            torch.cuda.synchronize(gpu)
            barrier()
            if rank != 0:
                return {"equal": out is None, "mismatches": 0}
            cpu = tp.comm.treduce(tp.comm.ParallelGroup(xs, root=0), backend="cpu", tile=tile, pingpong=pingpong)
            mismatches = int(np.count_nonzero(out.cpu().numpy().view(np.uint32) != cpu.view(np.uint32)))
            return {"equal": mismatches == 0, "mismatches": mismatches}
        guarded(records, path if rank == 0 else None, {"series": series, "gpus": ngpus, "bytes": nbytes,
                                                        "verify": True}, check)
    comm.close()
    dist.destroy_process_group()


def host_timings(comm) -> dict:
    """The nccl transport's host time per phase since the last read (seconds; {} for other transports)."""
    transport = comm.state.get("transport")
    nccl = getattr(transport, "nccl", None)
    return dict(nccl.timings()) if nccl is not None else {}


def verify_process(_, path, gpu_counts, tile, pingpong):
    """tileprim on the GPUs equals the CPU backend bit for bit, for each algorithm."""
    import numpy as np
    import torch
    import tileprim as tp
    records = []
    rng = np.random.default_rng()
    for ngpus in gpu_counts:
        for nbytes in VERIFY_SIZES:
            xs = [rng.standard_normal(shape_for(nbytes)).astype(np.float32) for _ in range(ngpus)]
            for dispatch in algorithms(ngpus) + [None]:
                kwargs = dict(op="sum", tile=tile, pingpong=pingpong, dispatch=dispatch)

                def measure():
                    on_gpus = [torch.from_numpy(x).to(f"cuda:{r}") for r, x in enumerate(xs)]
                    gpu = tp.comm.treduce(tp.comm.ParallelGroup(on_gpus, root=0), **kwargs).cpu().numpy()
                    cpu = tp.comm.treduce(tp.comm.ParallelGroup(xs, root=0), backend="cpu", **kwargs)
                    mismatches = int(np.count_nonzero(gpu.view(np.uint32) != cpu.view(np.uint32)))
                    return {"equal": mismatches == 0, "mismatches": mismatches}
                point = {"series": dispatch or "auto", "gpus": ngpus, "bytes": nbytes}
                guarded(records, path, point, measure)


# ---- the parent: runs each series in its own processes, then reports ----------------------------------
def isolated(torch, target, args, nprocs: int, deadline_s: float) -> tuple:
    """Run target(i, path, *args) in nprocs spawned processes; (records rank 0 saved, error or None)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "records.json")
        error = None
        start = time.monotonic()
        ctx = torch.multiprocessing.spawn(target, args=(path,) + tuple(args), nprocs=nprocs, join=False)
        try:
            while not ctx.join(timeout=2):
                if time.monotonic() - start > deadline_s:
                    for p in ctx.processes:
                        p.kill()
                        p.join()
                    error = f"{target.__name__}: killed after the {deadline_s:.0f} s deadline"
                    break
        except Exception as e:  # noqa: BLE001 - a child's crash is this series' result
            error = f"{target.__name__}: {type(e).__name__}: {e}"[:4000]
        records = json.load(open(path)) if os.path.exists(path) else []
    if error:
        print(f"  {last_line(error)}", file=sys.stderr, flush=True)
    return records, error


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lookup(points, series, gpus, nbytes):
    """The point, measured or failed; None where none was taken."""
    hits = [p for p in points if p["series"] == series and p["gpus"] == gpus and p["bytes"] == nbytes
            and not p.get("verify")]
    return hits[0] if hits else None


def find(points, series, gpus, nbytes):
    """The point where it was measured."""
    p = lookup(points, series, gpus, nbytes)
    return p if p and "error" not in p else None


def best_tileprim(points, gpus, nbytes, figure: str = "latency_us"):
    """The fastest forced algorithm's point by `figure` (latency_us, or gpu_us)."""
    found = [p for p in (find(points, a, gpus, nbytes) for a in algorithms(gpus)) if p and p.get(figure) is not None]
    return min(found, key=lambda p: p[figure]) if found else None


def cell(point, figures=("latency_us", "algbw_gbps")) -> str:
    if point is None or "error" in point:
        return f"{'-' if point is None else 'error':>15}"
    a, b = (point.get(f) for f in figures)
    return " ".join(f"{'-':>7}" if v is None else f"{v:7.1f}" for v in (a, b))


def ratio(point, base, width: int, inverse: bool = False) -> str:
    """point's algbw over base's (inverse: its latency over base's), or '-'."""
    if not point or not base:
        return f"{'-':>{width}}"
    value = point["latency_us"] / base["latency_us"] if inverse else point["algbw_gbps"] / base["algbw_gbps"]
    return f"{value:{width}.2f}"


def print_table(points, gpus, sizes, tile, pingpong, processes) -> None:
    """Latency and algbw of every series, then each series' algbw over NCCL's (auto/best: latency),
    then every series' GPU time and host issue time per call."""
    series = algorithms(gpus) + ["auto"] + processes + ["nccl", "peer_copy"]
    print(f"\n== {gpus} GPUs, root 0, float32, tile {tile[0]}x{tile[1]}, pingpong={pingpong}: "
          "latency us / algbw GB/s (calls back to back) ==")
    print(f"{'size':>9} " + " ".join(f"{s:>15}" for s in series))
    for nbytes in sizes:
        print(f"{human(nbytes):>9} " + " ".join(cell(lookup(points, s, 2 if s == "peer_copy" else gpus, nbytes))
                                                for s in series))
    versus = ["best", "auto"] + processes
    print(f"{'vs NCCL':>9} " + " ".join(f"{s + '/nccl':>15}" for s in versus) + f" {'auto/best us':>13} "
          f"{'auto chose':>15}")
    for nbytes in sizes:
        nccl, auto = find(points, "nccl", gpus, nbytes), find(points, "auto", gpus, nbytes)
        best = best_tileprim(points, gpus, nbytes)
        ratios = [ratio(best, nccl, 15), ratio(auto, nccl, 15)] + [ratio(find(points, s, gpus, nbytes), nccl, 15)
                                                                   for s in processes]
        print(f"{human(nbytes):>9} " + " ".join(ratios) + " " + ratio(auto, best, 13, inverse=True) +
              f" {(auto or {}).get('variant', '-'):>15}")
    print(f"-- {gpus} GPUs: GPU us per call with the host's issuing hidden / the host's issue us per call --")
    print(f"{'size':>9} " + " ".join(f"{s:>15}" for s in series))
    for nbytes in sizes:
        print(f"{human(nbytes):>9} " + " ".join(cell(lookup(points, s, 2 if s == "peer_copy" else gpus, nbytes),
                                                     ("gpu_us", "host_us")) for s in series))
    for nbytes in sizes:  # the model beside what ran
        auto = find(points, "auto", gpus, nbytes)
        if auto:
            print(f"  auto {human(nbytes)}: {auto['variant']}; model {auto.get('plan', {}).get('estimates', '-')}")
    for s in processes:  # where the nccl transport's host time goes, per call
        for nbytes in sizes:
            p = find(points, s, gpus, nbytes)
            if p and "nccl_host_us" in p:
                print(f"  {s} {human(nbytes)}: host per call {p['nccl_host_us']}, {p['variant']}; model {p['estimates']}")


def check_targets(points, sizes, gpu_counts) -> list:
    """Each target judged on its series (auto: what dispatch chose) at each size it covers; latency
    targets on both figures (calls back to back, and GPU time with the host's issuing hidden). auto
    meets "within 5% of the best forced algorithm" where it ran that algorithm (the difference is
    then between two runs of one kernel) or was within 5% of it."""
    verdicts = []
    for counts, series, what, covers, kind, bound in TARGETS:
        for figure in ("latency_us",) if kind == "ratio" else ("latency_us", "gpu_us"):
            for gpus in sorted(set(counts) & set(gpu_counts)):
                missed, measured = [], 0
                for nbytes in filter(covers, sizes):
                    point, nccl = find(points, series, gpus, nbytes), find(points, "nccl", gpus, nbytes)
                    best = best_tileprim(points, gpus, nbytes, figure)
                    base = {"ratio": nccl, "nccl_us": nccl, "best": best, "us": point}[kind]
                    if point is None or base is None or point.get(figure) is None or base.get(figure) is None:
                        continue
                    measured += 1
                    ok = {"ratio": lambda: point["algbw_gbps"] >= bound * base["algbw_gbps"],
                          "us": lambda: point[figure] <= bound,
                          "nccl_us": lambda: point[figure] <= bound * base[figure],
                          "best": lambda: (point[figure] <= bound * base[figure]
                                           or point.get("variant") == base["series"])}[kind]()
                    if not ok:
                        missed.append(f"{human(nbytes)} ({point.get('variant', series)}: {point[figure]:.1f} us"
                                      + (f" against {base[figure]:.1f}" if base is not point else "") + ")")
                verdict = "missed at " + ", ".join(missed) if missed else "met" if measured else "not measured"
                verdicts.append({"gpus": gpus, "series": series, "target": what, "sizes_measured": measured,
                                 "figure": "back to back" if figure == "latency_us" else "GPU time",
                                 "verdict": verdict})
    return verdicts


def name_list(choices):
    def parse(text: str) -> list:
        names = [t for t in text.split(",") if t]
        bad = [n for n in names if n not in choices]
        if bad or not names:
            raise argparse.ArgumentTypeError(f"expected some of {', '.join(choices)}, not {text!r}")
        return names
    return parse


def main() -> int:
    out_dir = os.environ.get("OUT")
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int_list, default=[2, 4], help="GPU counts (default 2,4; 8 where there are 8)")
    parser.add_argument("--sizes", type=lambda text: [parse_size(s) for s in text.split(",")],
                        default=DEFAULT_SIZES, help="bytes per rank, e.g. 4K,64K,16M,1G "
                                                    "(default: 4 KiB to 1 GiB in steps of 4x)")
    parser.add_argument("--tile", type=int_list, default=[64, 256], help="treduce's tile rows,cols (64,256)")
    parser.add_argument("--no-pingpong", dest="pingpong", action="store_false", help="acc/recv tiles")
    parser.add_argument("--verify", action="store_true", help="also check GPU == CPU backend bit for bit")
    parser.add_argument("--distributed", action="store_true",
                        help="also tileprim with one process per GPU, beside NCCL")
    parser.add_argument("--transport", type=name_list(["cuda_ipc", "nccl"]), default=["cuda_ipc", "nccl"],
                        help="the one-process-per-GPU series' transports (default cuda_ipc,nccl)")
    parser.add_argument("--network", action="store_true",
                        help="NCCL on its network transport (P2P and SHM off); only NCCL and --distributed")
    parser.add_argument("--dispatch", type=name_list(["root_pull", "scatter_gather", "chain"]), default=[],
                        help="also the one-process-per-GPU series with these algorithms forced (default: auto only)")
    parser.add_argument("--hosts", action="store_true",
                        help="--network with every process on a host of its own, sharing the GPUs there are")
    parser.add_argument("--batches", type=int, default=BATCHES,
                        help=f"timed batches per point (default {BATCHES}); more steady a noisy link's median")
    parser.add_argument("--deadline", type=float, default=200.0, help="seconds a series' processes may run")
    parser.add_argument("--json", default=os.path.join(out_dir or ".", "treduce.json"),
                        help="where the results go (default: $OUT/treduce.json, else ./treduce.json)")
    args = parser.parse_args()
    if len(args.tile) != 2:
        parser.error("--tile takes two numbers: rows,cols")
    tile, sizes = tuple(args.tile), sorted(set(args.sizes))
    # NVLink multicast stays off: NCCL's NVLS, PyTorch's symmetric memory, NVSHMEM
    os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    os.environ["TREDUCE_BENCH_BATCHES"] = str(args.batches)
    if args.hosts:
        os.environ["TREDUCE_BENCH_HOSTS"] = "1"
        args.network = True
    if args.network:
        os.environ.update(NCCL_P2P_DISABLE="1", NCCL_SHM_DISABLE="1")
        args.distributed = True
    nccl_env = [k for k in os.environ if k.startswith("NCCL_")]

    result = {"config": {"gpus": args.gpus, "sizes": sizes, "tile": list(tile), "pingpong": args.pingpong,
                         "dtype": "float32", "root": 0, "warmup": WARMUP, "batches": args.batches,
                         "transport": args.transport, "dispatch": args.dispatch, "hosts": args.hosts,
                         "env": {k: os.environ[k] for k in nccl_env}},
              "points": [], "verify": [], "failures": [], "targets": []}

    def save():
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)

    try:
        import torch
        available = torch.cuda.device_count()
        nccl = torch.cuda.nccl.version()  # a tuple in recent releases, an int in old ones
        result["meta"] = {"torch": torch.__version__,
                          "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl),
                          "devices": [torch.cuda.get_device_name(i) for i in range(available)]}
        import tileprim as tp
        result["meta"]["tileprim"] = tp.__version__
    except Exception:  # noqa: BLE001 - reported, and nothing can be measured
        result["failures"].append(traceback.format_exc())
        save()
        print(f"cannot measure: {last_line(result['failures'][-1])}", file=sys.stderr)
        return 1
    gpu_counts = [n for n in args.gpus if 2 <= n and (n <= available or args.hosts and available)]
    for n in sorted(set(args.gpus) - set(gpu_counts)):
        result["failures"].append(f"{n} GPUs: skipped, {available} visible (2 or more needed)")
    print(f"devices: {result['meta']['devices']}; torch {torch.__version__}, NCCL {result['meta']['nccl']}, "
          f"tileprim {tp.__version__}; sizes {human(sizes[0])} .. {human(sizes[-1])}", flush=True)

    def series(label, target, args_, nprocs=1, into="points"):
        print(f"running: {label}", flush=True)
        records, error = isolated(torch, target, args_, nprocs, args.deadline)
        result[into].extend(records)
        if error:
            result["failures"].append(error)
        save()

    if gpu_counts and not args.network:
        series("peer copy cuda:1 -> cuda:0", peer_copy_process, (sizes,))
    for n in gpu_counts:
        if not args.network:
            series(f"tileprim on {n} GPUs", tileprim_process, (n, sizes, tile, args.pingpong))
        series(f"NCCL reduce on {n} GPUs", nccl_process, (n, sizes, free_port()), nprocs=n)
        processes = []
        for transport, dispatch in itertools.product(args.transport if args.distributed else [],
                                                     [None] + args.dispatch):
            processes.append(TRANSPORT_SERIES[transport] + (f":{dispatch}" if dispatch else ""))
            series(f"tileprim, one process per GPU ({transport}, {dispatch or 'auto'}), on {n} GPUs",
                   distributed_process, (n, sizes, free_port(), tile, args.pingpong, args.verify and not dispatch,
                                         transport, dispatch), nprocs=n)
        print_table(result["points"], n, sizes, tile, args.pingpong, processes)
        for v in (p for p in result["points"] if p.get("verify") and p["gpus"] == n):
            outcome = v.get("error", "")[:200] or ("equal" if v["equal"] else f"{v['mismatches']} differ")
            print(f"verify {n} processes {v['series']} {human(v['bytes'])}: GPU == CPU backend: {outcome}")
    if args.verify and gpu_counts and not args.network:
        series("verify: GPU == CPU backend", verify_process, (gpu_counts, tile, args.pingpong), into="verify")
        for v in result["verify"]:
            outcome = v.get("error", "")[:200] or ("equal" if v["equal"] else f"{v['mismatches']} differ")
            print(f"verify {v['gpus']} GPUs {human(v['bytes'])} {v['series']}: {outcome}")
    result["targets"] = [] if args.network else check_targets(result["points"], sizes, gpu_counts)
    devices = ", ".join(sorted(set(result["meta"]["devices"])))
    for t in result["targets"]:
        print(f"target ({t['gpus']} GPUs, {t['series']}, {t['figure']}; set for H200s, here {devices}): "
              f"{t['target']}: {t['verdict']}")
    for failure in result["failures"]:
        print(f"failure: {last_line(failure)}", file=sys.stderr)
    save()
    print(f"results: {args.json}")
    return 0 if gpu_counts else 1


if __name__ == "__main__":
    sys.exit(main())
