"""One rank of a multi-process treduce test, started by tests/test_treduce_processes.py the way a
launcher would start it:

    python treduce_processes.py CASES.json INIT_FILE RANK WORLD_SIZE OUT_DIR [cpu|cuda]

Every rank builds every rank's tensors of each case from the case's seed (so the test can
compute what the root must get), reduces its own through tp.comm.treduce (cuda: as a torch
tensor on GPU RANK, through CUDA IPC), and records what
happened: the root's dst buffer's bits as OUT_DIR/<case>.npy (see saved_result), and per case "none" (a non-root's None),
"dst" (the root's result saved) or "error <Type>: <message>" into OUT_DIR/rank<r>.json."""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tileprim as tp  # noqa: E402
from test_treduce import DST_LAYOUTS, SOURCE_LAYOUTS, laid_out, np_dtype, poisoned, random_source  # noqa: E402


def case_tensors(case: dict, world_size: int) -> list:
    """Every rank's tensor of a case (a view laid out as the case says)."""
    shape = tuple(case["shape"])
    return [laid_out(SOURCE_LAYOUTS[case.get("src", "src-contiguous")], shape,
                     lambda s, r=r: random_source(np.random.default_rng([case["seed"], r]), s, case["dtype"]))[1]
            for r in range(world_size)]


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


def bits(out) -> np.ndarray:
    if isinstance(out, np.ndarray):
        return out.view(f"u{out.itemsize}")
    import torch
    if out.numel() == 0:
        return np.zeros(0, np.uint8)
    return out.contiguous().view(torch.uint8).cpu().numpy()  # the test reshapes


def run_rank(cases, init_file: str, rank: int, world_size: int, out_dir: str, backend: str) -> None:
    comm = tp.comm.init(backend=backend, rank=rank, world_size=world_size, init_file=init_file, timeout=60,
                        device=rank if backend == "cuda" else None)
    record = []
    for i, case in enumerate(cases):
        role = case.get("role", {}).get(str(rank), "")
        if role == "exit":
            os._exit(3)
        if role == "hang":
            time.sleep(6)  # longer than the others wait, then gone
            os._exit(4)
        x = case_tensors(case, world_size)[rank]
        if role == "other-shape":
            x = x[..., :-1]
        if role == "float64":
            x = x.astype(np.float64)
        buffer, dst = case_dst(case) if rank == case["root"] else (None, None)
        if backend == "cuda":
            x = on_gpu(x, rank)
            buffer = dst = None if dst is None else on_gpu(dst, rank)
        group = tp.comm.ParallelGroup.distributed(x, root=case["root"], comm=comm)
        try:
            out = tp.comm.treduce(group, dst, timeout=case.get("timeout"), **options(case))
        except Exception as e:  # recorded for the test to judge
            record.append(f"error {type(e).__name__}: {e}")
            continue
        if out is None:
            record.append("none")
            continue
        np.save(os.path.join(out_dir, f"{i}.npy"), bits(out if buffer is None else buffer))  # bfloat16 too
        record.append("dst" if dst is None or out is dst else "another array")
    if backend == "cuda":
        import torch
        torch.cuda.synchronize(rank)  # the root may still read this rank's memory
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)
    comm.close()


if __name__ == "__main__":
    cases_path, init_file, rank, world_size, out_dir = sys.argv[1:6]
    with open(cases_path) as f:
        run_rank(json.load(f), init_file, int(rank), int(world_size), out_dir, (sys.argv[6:] or ["cpu"])[0])
