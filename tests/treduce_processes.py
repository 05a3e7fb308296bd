"""One rank of a multi-process treduce test, started by tests/test_treduce_processes.py the way a
launcher would start it:

    python treduce_processes.py CASES.json INIT_FILE RANK WORLD_SIZE OUT_DIR [cpu|cuda_ipc|nccl][-hosts]

or under torchrun, which names the rank and world size (INIT_FILE, RANK and WORLD_SIZE "-"): the
ranks then meet through the torch.distributed group the worker initialises.

Every rank builds every rank's tensors of each case from the case's seed (so the test can
compute what the root must get), reduces its own through tp.comm.treduce (the GPU transports: as
a torch tensor on GPU RANK, or RANK mod the GPUs there are, laid out as the case says; nccl-hosts:
every rank claims a host of its own, to tileprim and to NCCL, so the ranks meet as on several hosts
and may share a GPU), and records what happened: the root's dst buffer's
bits as OUT_DIR/<case>.npy (see saved_result), and per case "none" (a non-root's None), "dst" (the
root's result saved) or "error <Type>: <message>" into OUT_DIR/rank<r>.json."""
from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tileprim as tp  # noqa: E402
from tileprim.comm.transports import nccl as nccl_transport  # noqa: E402
from test_treduce import DST_LAYOUTS, SOURCE_LAYOUTS, laid_out, np_dtype, poisoned, random_source  # noqa: E402


BUSY_S = 3.0


def case_buffers(case: dict, world_size: int) -> list:
    """Every rank's (buffer, tensor) of a case: the tensor a view laid out as the case says."""
    shape = tuple(case["shape"])
    return [laid_out(SOURCE_LAYOUTS[case.get("src", "src-contiguous")], shape,
                     lambda s, r=r: random_source(np.random.default_rng([case["seed"], r]), s, case["dtype"]))
            for r in range(world_size)]


def case_tensors(case: dict, world_size: int) -> list:
    return [view for _, view in case_buffers(case, world_size)]


def case_dst(case: dict):
    """(buffer, view) of the root's poisoned dst, or (None, None) for an allocated one."""
    if case.get("dst") is None:
        return None, None
    return laid_out(DST_LAYOUTS[case["dst"]], tuple(case["shape"]), lambda s: poisoned(s, case["dtype"]))


def saved_result(out_dir, i: int, case: dict, shape) -> np.ndarray:
    return np.load(os.path.join(out_dir, f"{i}.npy")).view(np_dtype(case["dtype"])).reshape(shape)


OPTIONS = ("op", "tile", "pingpong", "valid", "accumulate", "dispatch")


def options(case: dict) -> dict:
    out = {k: case[k] for k in OPTIONS if k in case}
    if "tile" in out:
        out["tile"] = tuple(out["tile"])
    return out


def on_gpu(x: np.ndarray, device: int):
    """A NumPy array as a torch tensor on `device`, its bits unchanged (bfloat16 too)."""
    import torch
    bits = torch.from_numpy(np.ascontiguousarray(x).view(f"i{x.itemsize}"))
    dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int32": torch.int32}
    return bits.to(f"cuda:{device}").view(dtype[x.dtype.name])


def laid_out_on_gpu(buffer: np.ndarray, view: np.ndarray, device: int):
    """(buffer, view) of a NumPy buffer and its view, copied to `device` (the view's strides kept)."""
    import torch
    itemsize, gpu_buffer = buffer.itemsize, on_gpu(buffer, device)
    offset = (view.__array_interface__["data"][0] - buffer.__array_interface__["data"][0]) // itemsize
    return gpu_buffer, torch.as_strided(gpu_buffer, view.shape, [s // itemsize for s in view.strides], offset)


def bits(out) -> np.ndarray:
    if isinstance(out, np.ndarray):
        return out.view(f"u{out.itemsize}")
    import torch
    if out.numel() == 0:
        return np.zeros(0, np.uint8)
    return out.contiguous().view(torch.uint8).cpu().numpy()  # the test reshapes


def communicator(init_file: str, rank: str, world_size: str, transport: str):
    """tp.comm.init as the test launched this rank: an init file, or torchrun's group."""
    if transport.endswith("-hosts"):  # NCCL too: so ranks may share a GPU, as on hosts of their own
        os.environ["TILEPRIM_HOST_ID"] = os.environ["NCCL_HOSTID"] = f"host-{os.environ.get('RANK', rank)}"
        transport = transport[:-len("-hosts")]
    on_gpu_ = transport != "cpu"
    kwargs = {"backend": "cuda" if on_gpu_ else "cpu", "transport": None if transport == "cpu" else transport,
              "timeout": 60}
    if init_file == "-":  # under torchrun
        import torch.distributed as dist
        dist.init_process_group("gloo")
        return tp.comm.init(device=gpu_of(dist.get_rank()) if on_gpu_ else None, **kwargs)
    return tp.comm.init(rank=int(rank), world_size=int(world_size), init_file=init_file,
                        device=gpu_of(int(rank)) if on_gpu_ else None, **kwargs)


def gpu_of(rank: int) -> int:
    """Rank r's GPU: r itself, or r mod the GPUs there are (more ranks than GPUs share them)."""
    import torch
    return rank % torch.cuda.device_count()


def _injected_failure(*args):
    raise RuntimeError("injected: this rank's share of the call failed")


SHARD_FOLD = nccl_transport._shard_fold


def run_rank(cases, comm, out_dir: str) -> None:
    rank, world_size, backend = comm.rank, comm.world_size, comm.backend
    if rank == 0:  # the test looks for what the job left in /dev/shm by its name
        with open(os.path.join(out_dir, "job"), "w") as f:
            f.write(comm.job)
    record = []
    for i, case in enumerate(cases):
        roles = set(case.get("role", {}).get(str(rank), "").split("+"))
        if "exit" in roles:
            os._exit(3)
        if "hang" in roles:
            time.sleep(6)  # longer than the others wait, then gone
            os._exit(4)
        if "exit-after-posting" in roles:  # its call (and new shared buffer) posted, before the root maps it
            comm.rendezvous.post = lambda *args, post=comm.rendezvous.post: (post(*args), os._exit(6))
        if "exit-mid-transfer" in roles:  # once the root accepted the call, before sending a byte
            comm.state["transport"].finish_non_root = lambda *args: os._exit(5)
        # killed (no exit handlers) where the others' GPUs are left waiting for this rank: a non-root
        # once it posted its call, before its stream says "ready"; the root once it accepted the call
        if "killed-after-posting" in roles:
            comm.state["transport"].arrive = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
        if "killed-after-verdict" in roles:
            comm.rendezvous.publish_verdict = lambda *args, publish=comm.rendezvous.publish_verdict: (
                publish(*args), os.kill(os.getpid(), signal.SIGKILL))
        if "share-fails" in roles:  # a rank that works apart fails once the root told it where dst lies
            comm.state["transport"]._map = _injected_failure
        if "fold-fails" in roles:  # a worker under nccl whose every fold of its shard fails
            nccl_transport._shard_fold = lambda *args: _injected_failure
        if "staging-fails" in roles:  # its NCCL staging cannot be allocated (a switch compiled into the build)
            os.environ["TILEPRIM_INJECT_FAULT"] = "nccl_staging"
        root = next((int(role[5:]) for role in roles if role.startswith("root-")), case["root"])  # its own idea
        x_buffer, x = case_buffers(case, world_size)[rank]
        buffer, dst = case_dst(case) if rank == root else (None, None)
        if backend == "cuda":
            x = laid_out_on_gpu(x_buffer, x, comm.device)[1]
            if dst is not None:
                buffer, dst = laid_out_on_gpu(buffer, dst, comm.device)
        if "other-shape" in roles:
            x = x[..., :-1]
        if "float64" in roles:
            x = x.astype(np.float64) if isinstance(x, np.ndarray) else x.double()
        if "busy" in roles:  # this rank's stream reaches the call BUSY_S after its host
            import torch
            with torch.cuda.device(comm.device):
                torch.cuda._sleep(int(BUSY_S * 2e9))  # cycles: at least BUSY_S at clocks up to 2 GHz
        group = tp.comm.ParallelGroup.distributed(x, root=root, comm=comm)
        try:
            planned = tp.plan(tp.comm.treduce, group, **options(case)).variant if "variant" in case else None
            out = tp.comm.treduce(group, dst, timeout=case.get("timeout"), **options(case))
        except Exception as e:  # recorded for the test to judge
            record.append(f"error {type(e).__name__}: {e}")
            continue
        finally:
            if "share-fails" in roles:
                del comm.state["transport"]._map
            nccl_transport._shard_fold = SHARD_FOLD
            os.environ.pop("TILEPRIM_INJECT_FAULT", None)
        if planned != case.get("variant"):
            record.append(f"planned {planned}")
            continue
        if out is None:
            record.append("none")
            continue
        np.save(os.path.join(out_dir, f"{i}.npy"), bits(out if buffer is None else buffer))  # bfloat16 too
        record.append("dst" if dst is None or out is dst else "another array")
    if backend == "cuda":
        import torch
        torch.cuda.synchronize(comm.device)  # the root may still read this rank's memory
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)
    comm.close()


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks for the stacks of a rank past its deadline
    cases_path, init_file, rank, world_size, out_dir = sys.argv[1:6]
    with open(cases_path) as f:
        run_rank(json.load(f), communicator(init_file, rank, world_size, (sys.argv[6:] or ["cpu"])[0]), out_dir)
