"""KernelSpec.ffma = "kmajor" (MainloopFfmaKMajor): validation, name, shared-memory size and
an NVRTC compile without spills (no GPU needed)."""
from dataclasses import replace

import pytest


def _base():
    from skcontract.kernels import specs
    return specs.KernelSpec("float32", "float32", "float32", 128, 128, 16, 3, 2, 4, "ffma",
                            a_vec=4, b_vec=4, ffma="kmajor", min_blocks=2)


def test_kmajor_spec_fields():
    from skcontract.kernels import specs
    assert all(b.ffma == "kslice" and not b.name.endswith("_kmajor")
               for bases in specs.HEURISTIC_TILES.values() for b in bases)
    s = _base()
    assert s.name.endswith("_mb2_kmajor") and "MainloopFfmaKMajor" in s.cfg_source()
    assert "MainloopFfma<" in replace(s, ffma="kslice").cfg_source()
    for bad in (dict(ffma="kmajr"), dict(bm=8, bn=256), dict(mainloop="mma_sync"),
                dict(dtype_in="float64", dtype_out="float64", dtype_acc="float64")):
        with pytest.raises(ValueError):
            replace(s, **bad)
    # the k-major scratch [BK][X] of each k-contiguous operand follows the stages
    plain = replace(s, ffma="kslice")
    for la, lb, rows in (("row", "col", 256), ("row", "row", 128), ("col", "col", 128),
                         ("col", "row", 0)):
        k = specs.specialise(s, fixup="none", a_layout=la, b_layout=lb)
        p = specs.specialise(plain, fixup="none", a_layout=la, b_layout=lb)
        assert k.smem_bytes - p.smem_bytes == k.scratch_bytes == rows * s.bk * 4


def test_kmajor_compiles_without_spills():
    """Both transposes (row/col) and none (col/row), the deterministic fixup, 2 CTAs/SM."""
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
    try:
        ok = nvrtc.nvrtcVersion()[0] == nvrtc.nvrtcResult.NVRTC_SUCCESS
    except Exception:  # noqa: BLE001 - libnvrtc missing
        ok = False
    if not ok:
        pytest.skip("libnvrtc not loadable")
    from skcontract.kernels import compile_check, specs
    todo = [specs.specialise(_base(), fixup="deterministic", a_layout=la, b_layout=lb)
            for la, lb in (("row", "col"), ("col", "row"))]
    results = compile_check.check(todo, verbose=False)
    bad = [f"{r.spec} [{r.arch}]: {r.message[:500]}" for r in results if not r.ok]
    assert not bad, "\n".join(bad)
