"""The developer tools of tools/: the library imports none of them; the kernel warmer's spec
selection (no GPU needed to choose the specs)."""
import subprocess
import sys
from pathlib import Path

from skcontract.kernels import catalogue, specs
from tools import warm_kernels


def test_the_library_imports_no_tools():
    code = ("import sys, skcontract, skcontract.schedule, skcontract.kernels, "
            "skcontract.kernels.gemm, skcontract.kernels.jit; "
            "print([m for m in sys.modules if m == 'tools' or m.startswith('tools.')])")
    root = Path(__file__).resolve().parents[2]  # this checkout's skcontract
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=root).stdout
    assert out.strip() == "[]"


def test_warm_selects_every_entrys_specializations():
    every = specs.all_specs()
    assert warm_kernels.select("all") == every
    assert {s.base for s in every} == set(catalogue.all_bases())
    pending = {b for bases in catalogue.PENDING.values() for b in bases}
    offered = warm_kernels.select("default-tiles")
    assert offered == [s for s in every if s.base not in pending]
    assert {s.base for s in offered} == set(catalogue.all_bases()) - pending
    assert warm_kernels.select("representative") == specs.representative_specs()
    fp64 = warm_kernels.select("all", "float64")
    assert fp64 and all(s.dtype_in == "float64" for s in fp64)
    pairs = warm_kernels.select("all", families="WgmmaPair")
    assert pairs and all(s.base.FAMILY == "WgmmaPair" for s in pairs)
