"""The examples in docstrings and in docs/*.md run and print what they say."""
from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
# Every module whose docstrings carry examples and that imports without a GPU.
MODULES = ["skcontract", "skcontract.contract", "skcontract.explain", "skcontract.dtypes",
           "skcontract.backends", "skcontract.schedule", "skcontract.schedule.device",
           "skcontract.plan.classify"]
DOCS = ["docs/einsum.md", "docs/schedules.md"]


@pytest.mark.parametrize("name", MODULES)
def test_module_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=FLAGS)
    assert result.failed == 0


@pytest.mark.parametrize("page", DOCS)
def test_docs_examples(page):
    result = doctest.testfile(str(ROOT / page), module_relative=False, optionflags=FLAGS)
    assert result.failed == 0
