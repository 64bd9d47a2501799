"""CPU compile check of the GPU kernels (no GPU needed): NVRTC for sm_90a and sm_80.

Compiles the representative spec set (every dtype, mainloop, fixup, layout and vector width
at least once); ``python -m tools.compile_check --all`` compiles every spec the
launcher can choose.
"""
import pytest

from tools import compile_check, sass

nvrtc = pytest.importorskip("cuda.bindings.nvrtc")


def _nvrtc_works() -> bool:
    try:
        err, *_ = nvrtc.nvrtcVersion()
        return err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    except Exception:  # noqa: BLE001 - libnvrtc missing
        return False


pytestmark = pytest.mark.skipif(not _nvrtc_works(), reason="libnvrtc not loadable")


def test_representative_specs_compile_without_spills():
    from skcontract.kernels import specs
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


def test_tf32_and_int8_specs():
    """tf32 (float32 on mma_sync) and int8 (int32 accumulators / output) are legal specs, in
    the compiled lists, and chosen only where they should be."""
    from skcontract.kernels import specs
    tf32 = specs.HEURISTIC_TILES[specs.TF32][0]
    assert tf32.is_tf32 and "MainloopTf32" in tf32.cfg_source()
    i8 = specs.HEURISTIC_TILES["int8"][0]
    assert (i8.dtype_out, i8.dtype_acc) == ("int32", "int32") and "MainloopImma" in i8.cfg_source()
    assert specs.bases_for("float32") == specs.HEURISTIC_TILES["float32"]
    assert all(b.mainloop == "ffma" for b in specs.bases_for("float32"))
    assert specs.bases_for("float32", allow_tf32=True) == specs.HEURISTIC_TILES[specs.TF32]
    assert specs.bases_for("float16", allow_tf32=True) == specs.HEURISTIC_TILES["float16"]
    with pytest.raises(TypeError):
        specs.bases_for("tf32")
    with pytest.raises(TypeError):
        specs.bases_for("int16")
    with pytest.raises(ValueError):
        specs.KernelSpec("int8", "int8", "int32")
    with pytest.raises(ValueError):
        specs.KernelSpec("int8", "int32", "int32", mainloop="ffma")
    with pytest.raises(ValueError):
        specs.KernelSpec("float16", "int32", "float32")
    rep = specs.representative_specs()
    for pred in (lambda s: s.is_tf32, lambda s: s.dtype_in == "int8"):
        chosen = [s for s in rep if pred(s)]
        assert {s.fixup for s in chosen} == set(specs.FIXUPS)
        assert {(s.a_layout, s.b_layout) for s in chosen} == {
            (a, b) for a in specs.LAYOUTS for b in specs.LAYOUTS}


def test_fp64_vec_fragment_specs():
    """KernelSpec.frag: "scalar" (default) keeps the existing names and pads; "vec" / "vecdb"
    (MainloopDmmaVec) need fp64 mma_k=8, pad for their conflict-free 16-byte fragment loads and
    compile without spills (the transposed row/row, the row-permuted x-contiguous A and the
    scalar k-contiguous A fragment paths, one each; the none fixup keeps fixup.cuh out)."""
    from dataclasses import replace

    from skcontract.kernels import specs
    vec_bases = [b for bases in specs.HEURISTIC_TILES.values() for b in bases
                 if b.frag != "scalar"]
    # the fp64 128x64 bases are the ones on 16-byte fragments (BK 32: 8 warps; BK 16: 4 warps,
    # two CTAs per SM, next-step fragments loaded ahead); the names say which
    assert [(b.dtype_in, b.bm, b.bn, b.bk, b.frag) for b in vec_bases] == [
        ("float64", 128, 64, 32, "vec"), ("float64", 128, 64, 16, "vecdb")]
    assert all(b.name.endswith(f"_{b.frag}") == (b.frag != "scalar")
               for bases in specs.HEURISTIC_TILES.values() for b in bases)
    w16 = specs.KernelSpec("float64", "float64", "float64", 128, 128, 16, 3, 4, 4, "mma_sync",
                           a_vec=2, b_vec=2, mma_k=8, frag="vec")
    assert w16.name.endswith("_k8_vec") and "MainloopDmmaVec" in w16.cfg_source()
    assert "MainloopDmma16" in replace(w16, frag="scalar").cfg_source()
    for bk in (16, 32):  # pitches: k-contiguous 8 (mod 16), x-contiguous 2 (mod 4) doubles
        s = replace(w16, bk=bk)
        assert (s.bk + s.pad(True)) % 16 == 8 and (s.bm + s.pad(False)) % 4 == 2
    for bad in (dict(mma_k=16), dict(mma_k=0), dict(frag="vector")):
        with pytest.raises(ValueError):
            replace(w16, **bad)
    with pytest.raises(ValueError):
        specs.KernelSpec("float32", "float32", "float32", frag="vec")
    todo = [specs.specialise(w16, fixup="none", a_layout="row", b_layout="row"),
            specs.specialise(w16, fixup="none", a_layout="row", b_layout="col"),
            specs.specialise(replace(w16, bn=64, bk=32, warps_n=2, frag="vecdb"),
                             fixup="none", a_layout="row", b_layout="row")]
    results = compile_check.check(todo, verbose=False)
    bad = [f"{r.spec} [{r.arch}]: {r.message[:500]}" for r in results if not r.ok]
    assert not bad, "\n".join(bad)


def test_one_row_tiles_copy_x_contiguous_operands_by_element():
    """A 16-byte vector along a one-row tile's single row would straddle tiles: specialise()
    gives x-contiguous operands of such tiles element copies, aligned or not, and
    all_specs() lists each resulting kernel once."""
    from skcontract.kernels import specs
    gemv = next(b for b in specs.HEURISTIC_TILES["float32"] if b.bm == 1)
    col_a = specs.specialise(gemv, fixup="none", a_layout="col", b_layout="row")
    row_a = specs.specialise(gemv, fixup="none", a_layout="row", b_layout="row")
    assert (col_a.a_vec, col_a.b_vec) == (1, 4) and (row_a.a_vec, row_a.b_vec) == (4, 4)
    assert specs.specialise(gemv, fixup="none", a_layout="col", b_layout="row",
                            a_aligned=False) == col_a
    names = [s.name for s in specs.all_specs()]
    assert len(names) == len(set(names)) and col_a.name in names


def test_sass_loop_report_parses_a_listing():
    """tools.sass finds backward branches and counts the math in their bodies
    (a hand-written listing in nvdisasm's format; no nvdisasm needed)."""
    listing = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_1:
        /*0010*/                   LDS.128 R4, [R2] ;
        /*0020*/                   DMMA.16x8x8 R8, R4, R6, R8 ;
        /*0030*/                   DMMA.16x8x8 R12, R4, R6, R12 ;
        /*0040*/               @P0 BRA `(.L_x_1) ;
        /*0050*/                   EXIT ;
"""
    instrs, labels = sass.parse(listing)
    assert [op for _, op, _ in instrs] == ["MOV", "LDS", "DMMA", "DMMA", "BRA", "EXIT"]
    assert labels == {1: 0x10} and sass.loops(instrs, labels) == [(0x10, 0x40)]


def test_compile_check_builds_each_spec_for_the_archs_it_is_offered_on():
    """KernelSpec.min_cc: the fp64 two-CTA base (Hopper only) is compiled for sm_90a, not
    sm_80, by the compile check; min_cc must be a compute capability."""
    from dataclasses import replace

    from skcontract.kernels import specs
    base = next(b for b in specs.HEURISTIC_TILES["float64"] if b.min_cc == 90)
    spec = specs.specialise(base, fixup="none", a_layout="row", b_layout="col")
    results = compile_check.check([spec], verbose=False)
    assert [(r.arch, r.ok) for r in results] == [("sm_90a", True)]
    assert specs.offered_on(spec, 90) and not specs.offered_on(spec, 80)
    assert specs.offered_on(spec, None)
    for bad in (-1, 9.5):
        with pytest.raises(ValueError, match="min_cc"):
            replace(base, min_cc=bad)


def test_sm_sharing_bases_specialise_aligned_only():
    """The fp64 two-CTA base spills in misaligned specializations: all_specs() (what the
    compile check and the launcher can reach) lists only its 16-byte aligned ones."""
    from skcontract.kernels import specs
    base = next(b for b in specs.HEURISTIC_TILES["float64"] if specs.shares_sm(b))
    mine = [s for s in specs.all_specs()
            if (s.dtype_in, s.bm, s.bn, s.bk, s.min_blocks) == ("float64", 128, 64, 16, 2)]
    assert len(mine) == len(specs.FIXUPS) * len(specs.LAYOUTS) ** 2
    assert all(s.a_vec == 2 and s.b_vec == 2 for s in mine)
    assert not specs.shares_sm(specs.HEURISTIC_TILES["float64"][0])
