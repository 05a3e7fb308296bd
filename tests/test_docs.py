"""The documentation runs: every Python block of the README and of the docs pages (in order, one
namespace per page; a block whose first line is '# needs a GPU' only where one is usable,
'# needs NVRTC' only where tp.lower can compile, '# needs torch' only where torch is installed), the
docstrings' examples as doctests, and docs/tour.ipynb executed top to bottom on the default backend."""
import doctest
import importlib.util
import pathlib
import re

import numpy as np
import pytest

import tileprim as tp
from conftest import cuda_usable

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").rglob("*.md"))


def python_blocks(path: pathlib.Path):
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


# A block's first line may name what it needs; a gate not listed here is a typo, and fails.
GATES = {
    "# needs a GPU": cuda_usable,
    "# needs NVRTC": lambda: tp.info()["nvrtc"]["ok"],
    "# needs torch": lambda: importlib.util.find_spec("torch") is not None,
}


def runnable(block: str) -> bool:
    first = block.split("\n", 1)[0].strip()
    if not first.startswith("# needs"):
        return True
    assert first in GATES, f"a docs block needs {first[len('# needs'):].strip()!r}: not a gate test_docs knows"
    return GATES[first]()


def run_page(path: pathlib.Path) -> dict:
    """Runs the page's blocks in order in one namespace; returns it."""
    namespace = {}
    for block in python_blocks(path):
        if runnable(block):
            # not the file's name: torch.compile reads the source of the code it traces by its file name
            exec(compile(block, f"<{path.relative_to(ROOT)} block>", "exec"), namespace)
    return namespace


def test_the_readme_runs_as_pasted():
    assert any(runnable(b) for b in python_blocks(ROOT / "README.md"))
    run_page(ROOT / "README.md")


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)],
                         ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_every_docs_page_runs_as_pasted(page):
    run_page(page)


def test_the_docs_pictures_are_the_ones_the_script_draws():
    images = ROOT / "docs" / "images"
    linked = set()
    for page in PAGES + [ROOT / "README.md"]:
        linked |= {pathlib.Path(m).name for m in re.findall(r"\]\((?:\.\./)*(?:docs/)?images/([^)]+)\)", page.read_text())}
    assert linked and linked <= {p.name for p in images.iterdir()}, linked


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
    for name, fn in tp._ops.public.OPS.items():
        for section in ("Parameters", "Returns", "Raises", "Examples"):
            assert section in (fn.__doc__ or ""), (name, section)
    for obj in (tp.plan, tp.lower, tp.variants, tp.info, tp.op_table, tp.cta, tp.comm.treduce, tp.comm.ParallelGroup,
                tp.TileLayout, tp.Plan, tp.Swizzle, tp.ExecScope):
        assert "Examples" in (obj.__doc__ or ""), obj


def test_the_tour_notebook_runs():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(ROOT / "docs" / "tour.ipynb", as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    committed = [o for cell in code for o in cell.get("outputs", [])]
    assert any("image/svg+xml" in o.get("data", {}) for o in committed), \
        "commit the notebook with its outputs (jupyter execute --inplace docs/tour.ipynb)"
    for cell in code:
        cell.outputs = []
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "docs")}}).execute()
    images = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs
              if "image/svg+xml" in o.get("data", {}) or "text/html" in o.get("data", {})]
    assert images, "the tour shows no picture"
