"""The examples in docstrings and in docs/*.md run and print what they say.

Every module of the package is collected (pkgutil.walk_packages), so a new module's examples
run without being listed here; a module that needs CuPy to import is skipped on a machine
without it (its examples then run where CuPy is installed).
"""
from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import skcontract

ROOT = Path(__file__).resolve().parents[2]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
PAGES = ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")
                               if "benchmarks" not in p.parts)
"""Every page a reader runs code from: README.md and docs/ (the benchmark records excepted)."""
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _reraise(name):
    raise  # walk_packages calls this while handling the import error: a package must import


def _needs_cupy(error: ModuleNotFoundError) -> bool:
    return (error.name or "").split(".")[0] == "cupy"


def _modules_with_examples():
    """Every module of skcontract that has examples; those that need CuPy, marked skipped."""
    names = [skcontract.__name__] + [m.name for m in pkgutil.walk_packages(
        skcontract.__path__, skcontract.__name__ + ".", onerror=_reraise)]
    finder = doctest.DocTestFinder()
    params = []
    for name in names:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if not _needs_cupy(e):
                raise
            params.append(pytest.param(name, marks=pytest.mark.skip(reason=f"{name} needs CuPy")))
            continue
        if any(t.examples for t in finder.find(module)):
            params.append(name)
    return params


MODULES = _modules_with_examples()


def test_the_examples_are_collected():
    names = {p if isinstance(p, str) else p.values[0] for p in MODULES}
    assert {"skcontract", "skcontract.contract", "skcontract.schedule"} <= names


@pytest.mark.parametrize("name", MODULES)
def test_module_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=FLAGS)
    assert result.failed == 0


def _blocks():
    out = []
    for page in PAGES:
        for i, m in enumerate(BLOCK.finditer((ROOT / page).read_text())):
            out.append(pytest.param(page, m.group(1), id=f"{page}[{i}]"))
    return out


BLOCKS = _blocks()


def test_the_pages_code_blocks_are_collected():
    pages = {p.values[0] for p in BLOCKS}
    assert {"README.md", "docs/einsum.md", "docs/schedules.md"} <= pages


@pytest.mark.parametrize("page,code", BLOCKS)
def test_docs_code_blocks_run(page, code, tmp_path, monkeypatch):
    """Each ```python block of the pages runs: as a doctest when it shows a session
    (``>>>``), else as a script (in a scratch directory: blocks may write files). Blocks of
    one page share their names, in page order, as a reader's session would."""
    monkeypatch.chdir(tmp_path)
    namespace = _PAGE_NAMESPACES.setdefault(page, {})
    if ">>>" in code:
        test = doctest.DocTestParser().get_doctest(code, namespace, page, page, 0)
        runner = doctest.DocTestRunner(optionflags=FLAGS)
        runner.run(test, clear_globs=False)
        namespace.update(test.globs)  # a DocTest runs in a copy of the names it is given
        assert runner.failures == 0, f"{page}: a doctest block failed (see the output above)"
    else:
        exec(compile(code, page, "exec"), namespace)


_PAGE_NAMESPACES: dict = {}
