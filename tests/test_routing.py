"""The routing table: the call path imports no array library (torch, JAX, CuPy, nor tileprim's
adapters of them); each library's entry is found by its arrays' module, torch's once torch loads."""
import ast
import os
import pathlib
import subprocess
import sys

import numpy as np

import tileprim as tp
from tileprim._arrays import routing
from conftest import bits_equal, random_tile

PACKAGE = pathlib.Path(tp.__file__).resolve().parent
CALL_PATH = ["_calls", "_program", "comm"]
ADAPTERS = ("torch", "jax", "jaxlib", "cupy", "tileprim._torch", "tileprim._jax", "tileprim._arrays.cupy")


def run_python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PACKAGE.parent), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


def test_import_tileprim_imports_neither_torch_nor_jax():
    proc = run_python(
        "import sys, numpy as np, tileprim as tp\n"
        "x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)\n"
        "assert np.array_equal(tp.sum(x, axes=-1), tp.program(lambda a: tp.sum(a, axes=-1))(x, batch_dims=1))\n"
        "print(sorted(m for m in ('torch', 'jax', 'jaxlib', 'cupy') if m in sys.modules))")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]"]


def _imported_modules(path: pathlib.Path, text=None):
    """Every module a file imports (relative ones resolved), at the top or inside a function."""
    package = list(path.relative_to(PACKAGE.parent).parts[:-1])
    for node in ast.walk(ast.parse(path.read_text() if text is None else text)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


# torch.distributed's store is the bootstrap engine under torchrun, as mpi4py is under mpirun: imported
# only there (TORCHELASTIC_USE_AGENT_STORE set), never for torch's arrays
ENGINES = [("comm/processes/launcher.py", "torch.distributed")]


def test_the_call_path_imports_no_array_library():
    files = [p for room in CALL_PATH for p in (PACKAGE / room).rglob("*.py")]
    assert len(files) > 20
    found = [(str(p.relative_to(PACKAGE)), m) for p in files for m in _imported_modules(p)
             if any(m == a or m.startswith(a + ".") for a in ADAPTERS)]
    assert found == ENGINES


def test_the_check_sees_an_import_of_an_adapter():
    """The check above fails on a planted import (it reads relative and lazy imports)."""
    planted = PACKAGE / "_calls" / "call.py"
    text = planted.read_text() + "\n\ndef _planted():\n    from .._torch.ops import routing\n"
    assert "tileprim._torch.ops" in list(_imported_modules(planted, text))
    assert "tileprim._torch.ops" not in list(_imported_modules(planted))


def test_libraries_are_found_by_their_arrays_module():
    assert routing.library_of(np.ones(3)) is None and routing.library_of(1.5) is None
    import torch  # its entry is registered as it loads (or was, where another test loaded it)

    class Elsewhere(torch.Tensor):  # a subclass defined outside torch finds torch's entry
        pass
    t = torch.ones(3)
    assert routing.library_of(t) is not None
    assert routing.library_of(t.as_subclass(Elsewhere)) is routing.library_of(t)
    x = torch.linspace(-2, 2, 5, dtype=torch.float64, requires_grad=True)
    y = tp.exp(x)  # autograd: routed to the custom op by torch's entry
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())


def test_torch_registers_its_entry_when_it_loads_after_tileprim():
    proc = run_python(
        "import sys, tileprim as tp\n"
        "from tileprim._arrays import routing\n"
        "assert 'torch' not in sys.modules\n"
        "import torch\n"
        "x = torch.tensor([-1.5, 0.25, 4.0], requires_grad=True)\n"
        "assert routing.library_of(x) is not None\n"
        "tp.sqrt(x * x).sum().backward()\n"
        "print(x.grad.tolist(), type(tp.sqrt(torch.ones(2))).__name__)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[0] == "[-1.0, 1.0, 1.0] Tensor"


class _DLPackOnly:
    """An array known only by the DLPack protocol (DESIGN §2 takes any such array)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_an_array_known_only_by_dlpack_is_read_on_the_host(rng):
    x = random_tile(rng, (3, 17), "float32")
    for _ in range(2):  # the second call through the memo
        assert bits_equal(tp.sum(_DLPackOnly(x), axes=-1, batch_dims=1), tp.sum(x, axes=-1, batch_dims=1))
    assert bits_equal(tp.program(lambda a: tp.exp(a))(_DLPackOnly(x), batch_dims=1), tp.exp(x, batch_dims=1))
    assert bits_equal(tp.add(_DLPackOnly(x), 1.0), tp.add(x, 1.0))
