"""The package's import graph: layers only import downwards, nothing reaches into the
scheduler's internals from above, and there is no cycle (docs/design/architecture.md).

Every ``import`` statement counts, module-level or inside a function."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "skcontract"
ARCHITECTURE = ROOT.parent / "docs" / "design" / "architecture.md"

LAYERS = {
    "skcontract.dtypes": 0, "skcontract.parse": 0, "skcontract.kinds": 0,
    "skcontract.layout": 0, "skcontract._version": 0,
    "skcontract.schedule": 1,
    "skcontract.plan": 2, "skcontract.kernels": 2,
    "skcontract.backends": 3, "skcontract.interop": 3, "skcontract.replan": 3,
    "skcontract.host": 3,
    "skcontract.dask": 4, "skcontract.semantics": 4, "skcontract.planning": 4,
    "skcontract.warm": 5, "skcontract.expression": 5,
    "skcontract.contract": 6, "skcontract.ops": 6, "skcontract.explain": 7,
    "skcontract.demo": 8,
    "skcontract.bench": 8, "skcontract.__main__": 9, "skcontract": 10,
}
"""Each unit's layer; a unit may import units of lower layers (and itself) only."""

SCHEDULER_PUBLIC = {"skcontract.schedule", "skcontract.schedule.table",
                    "skcontract.schedule.types", "skcontract.schedule.device",
                    "skcontract.schedule.heuristics", "skcontract.schedule.draw"}
"""What layers above the scheduler may import of it: its package namespace, the table format,
its value types, DeviceInfo, the named constants, the picture."""


def _documented_layers() -> dict[str, int]:
    """architecture.md's layer table: unit -> layer (a short name is skcontract's)."""
    out = {}
    for line in ARCHITECTURE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].isdigit():
            for name in re.findall(r"`([^`]+)`", cells[1].split("(")[0]):
                unit = name if name.startswith("skcontract") else f"skcontract.{name}"
                out[unit] = int(cells[0])
    return out


def test_the_documented_layers_are_the_asserted_ones():
    """docs/design/architecture.md's layer table is this test's LAYERS."""
    assert _documented_layers() == LAYERS


def test_the_library_imports_nothing_from_tools():
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            assert not [n for n in names if n.split(".")[0] == "tools"], path


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Absolute names of the skcontract modules ``path`` imports."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("skcontract")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("skcontract"):
                for a in node.names:  # "from . import table" names a module, not mod
                    sub = ROOT.parent / (mod + "." + a.name).replace(".", "/")
                    if sub.with_suffix(".py").exists() or (sub / "__init__.py").exists():
                        out.add(f"{mod}.{a.name}")
                    else:
                        out.add(mod)
    return out - {me}


def _unit(module: str) -> str:
    best = max((u for u in LAYERS if module == u or module.startswith(u + ".")), key=len)
    return best


GRAPH = {_module_name(p): _imports(p) for p in ROOT.rglob("*.py")}


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_go_down_the_layers(module):
    mine = _unit(module)
    for dep in GRAPH[module]:
        other = _unit(dep)
        if other == mine:
            continue
        assert LAYERS[other] < LAYERS[mine], f"{module} (layer {LAYERS[mine]}) imports {dep} " \
            f"(layer {LAYERS[other]})"
        if other == "skcontract.schedule":
            assert dep in SCHEDULER_PUBLIC, f"{module} reaches into the scheduler: {dep}"


def test_the_scheduler_imports_no_kernels_and_plans_none():
    for module, deps in GRAPH.items():
        if _unit(module) == "skcontract.schedule":
            assert not {d for d in deps if _unit(d) != "skcontract.schedule"} - {
                "skcontract.dtypes", "skcontract.kinds"}, module


def test_no_import_cycle():
    state: dict[str, int] = {}

    def visit(m, stack):
        state[m] = 1
        for d in GRAPH.get(m, ()):
            if d not in GRAPH:
                continue
            if state.get(d) == 1:
                cycle = stack[stack.index(d):] + [d] if d in stack else [m, d]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d, stack + [d])
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m, [m])
