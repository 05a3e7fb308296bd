"""The documentation runs: every Python block of the README (in order, one namespace; a block
whose first line is '# needs a GPU' only where one is usable, '# needs torch' only where torch is
installed), the docstrings' examples as doctests, and examples/tour.ipynb executed top to bottom on
the default backend."""
import doctest
import importlib.util
import pathlib
import re

import numpy as np
import pytest

import tileprim as tp
from conftest import cuda_usable

ROOT = pathlib.Path(__file__).resolve().parents[1]


def readme_blocks():
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_readme_runs_as_pasted():
    blocks = readme_blocks()
    assert len(blocks) >= 3
    namespace = {}
    ran = 0
    for block in blocks:
        if block.startswith("# needs a GPU") and not cuda_usable():
            continue
        if block.startswith("# needs torch") and importlib.util.find_spec("torch") is None:
            continue
        # not the file's name: torch.compile reads the source of the code it traces by its file name
        exec(compile(block, "<README.md block>", "exec"), namespace)
        ran += 1
    assert ran >= 2
    assert np.array_equal(namespace["out"], np.full((64, 300), 10, np.float32))


def documented():
    """Every public function, class and method of tileprim with an Examples section."""
    objects = [getattr(tp, name) for name in tp.__all__ if not name.startswith("_")]
    objects += [tp.comm.treduce, tp.comm.ParallelGroup, tp.TileLayout, tp.Plan, tp.Kernel]
    seen, found = set(), []
    for obj in objects:
        for test in doctest.DocTestFinder(recurse=True).find(obj, getattr(obj, "__name__", "obj")):
            if test.examples and id(test.docstring) not in seen:
                seen.add(id(test.docstring))
                found.append(test)
    return found


DOCTESTS = documented()


@pytest.mark.parametrize("test", DOCTESTS, ids=[t.name for t in DOCTESTS])
def test_docstring_examples(test):
    if ("tp.lower" in test.docstring or "tp_lower" in test.name) and not tp.info()["nvrtc"]["ok"]:
        pytest.skip("tp.lower needs NVRTC")
    test.globs = {"np": np, "tp": tp, "S": tp.S, "R": tp.R, "TileLayout": tp.TileLayout, "laneid": tp.laneid}
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0, f"{runner.failures} example(s) of {test.name} failed (see the output above)"


def test_every_public_function_and_class_documents_itself_with_an_example():
    for name, fn in tp._ops.OPS.items():
        for section in ("Parameters", "Returns", "Raises", "Examples"):
            assert section in (fn.__doc__ or ""), (name, section)
    for obj in (tp.plan, tp.lower, tp.variants, tp.info, tp.op_table, tp.cta, tp.comm.treduce, tp.comm.ParallelGroup,
                tp.TileLayout, tp.Plan, tp.Swizzle, tp.ExecScope):
        assert "Examples" in (obj.__doc__ or ""), obj


def test_the_tour_notebook_runs():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(ROOT / "examples" / "tour.ipynb", as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), \
        "commit the notebook without outputs"
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "examples")}}).execute()
    images = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs
              if "image/svg+xml" in o.get("data", {}) or "text/html" in o.get("data", {})]
    assert images, "the tour shows no picture"
