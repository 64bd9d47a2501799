"""The examples in docstrings and in docs/*.md run and print what they say.

Every module of the package is collected (pkgutil.walk_packages), so a new module's examples
run without being listed here; a module that needs CuPy to import is skipped on a machine
without it (its examples then run where CuPy is installed).
"""
from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import skcontract

ROOT = Path(__file__).resolve().parents[2]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
DOCS = ["docs/einsum.md", "docs/schedules.md"]


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


@pytest.mark.parametrize("page", DOCS)
def test_docs_examples(page):
    result = doctest.testfile(str(ROOT / page), module_relative=False, optionflags=FLAGS)
    assert result.failed == 0
