"""tp.comm.init() under plain torchrun (DESIGN §2: rank and world size from the launcher's
environment, no init_file, no process group of the program's): the ranks meet through the store
torchrun's agent keeps for its workers, and a second communicator's exchanges are kept apart."""
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch.distributed.run")

SCRIPT = textwrap.dedent("""
    import numpy as np
    import tileprim as tp
    for root in (0, 1):  # two communicators, one after the other
        comm = tp.comm.init(backend="cpu")
        x = np.arange(12, dtype=np.float32).reshape(3, 4) * (comm.rank + 1) - 5
        out = tp.comm.treduce(tp.comm.ParallelGroup.distributed(x, root=root, comm=comm), op="sum", tile=(2, 2))
        with open(f"rank{comm.rank}.txt", "a") as f:  # a file each: the ranks' prints interleave
            f.write(f"{comm.rank} {root} {comm!r} {None if out is None else out.tolist()}\\n")
        comm.close()
""")


def test_init_meets_through_torchruns_store(tmp_path):
    script = tmp_path / "ranks.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "MASTER_"))}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
                           str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    lines = [line for r in (0, 1) for line in (tmp_path / f"rank{r}.txt").read_text().splitlines()]
    assert len(lines) == 4, lines
    want = [[(4 * i + j) * 3 - 10 for j in range(4)] for i in range(3)]  # x0 + x1, in float32 exactly
    for line in lines:
        rank, root = int(line.split()[0]), int(line.split()[1])
        assert "torchrun's store" in line
        assert line.endswith(str([[float(v) for v in row] for row in want]) if rank == root else "None"), line
