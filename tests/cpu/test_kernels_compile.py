"""CPU compile check of the GPU kernels (no GPU needed): NVRTC for sm_90a and sm_80.

Compiles the representative spec set (every dtype, mainloop, fixup, layout and vector width
at least once); ``python -m skcontract.kernels.compile_check --all`` compiles every spec the
launcher can choose.
"""
import pytest

nvrtc = pytest.importorskip("cuda.bindings.nvrtc")


def _nvrtc_works() -> bool:
    try:
        err, *_ = nvrtc.nvrtcVersion()
        return err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    except Exception:  # noqa: BLE001 - libnvrtc missing
        return False


pytestmark = pytest.mark.skipif(not _nvrtc_works(), reason="libnvrtc not loadable")


def test_representative_specs_compile_without_spills():
    from skcontract.kernels import compile_check, specs
    results = compile_check.check(specs.representative_specs(), verbose=False)
    bad = [f"{r.spec} [{r.arch}]: {r.message[:500]}" for r in results if not r.ok]
    assert not bad, "\n".join(bad)


def test_spec_list_is_consistent():
    from skcontract.kernels import specs
    names = [s.name for s in specs.all_specs()]
    assert len(names) == len(set(names))
    rep = {s.name for s in specs.representative_specs()}
    assert rep <= set(names)
    for s in specs.all_specs():
        assert s.smem_bytes <= 227 * 1024, s.name


def test_source_inlines_every_header():
    from skcontract.kernels import jit, specs
    src = jit.render_source(specs.representative_specs()[0])
    assert '#include "' not in src
    for h in jit.header_files():
        assert f"---- {h.name} ----" in src, h.name
