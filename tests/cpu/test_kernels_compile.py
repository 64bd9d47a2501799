"""CPU compile check of the GPU kernels (no GPU needed): NVRTC for sm_90a and sm_80.

Compiles CI's sample of the specs (``compile_check.sampled_specs()``: every family, dtype,
protocol, layout, copy and im2col entry at least once; a test below checks that against
``specs.all_specs()``); ``python -m tools.compile_check`` compiles the representative set
(every catalogue entry) and ``python -m tools.compile_check --all`` every spec the launcher
can choose.
"""
import importlib
import re
import sys
from collections import defaultdict

import pytest

from tools import compile_check, sass
from skcontract.kernels import nvrtc as nvrtc_compile
from skcontract.schedule import DeviceInfo

nvrtc = pytest.importorskip("cuda.bindings.nvrtc")


def _nvrtc_works() -> bool:
    try:
        err, *_ = nvrtc.nvrtcVersion()
        return err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    except Exception:  # noqa: BLE001 - libnvrtc missing
        return False


pytestmark = pytest.mark.skipif(not _nvrtc_works(), reason="libnvrtc not loadable")


# ---- what the tests below compile, all in one compile_check.check() call ------------------
def _sampled():
    return compile_check.sampled_specs()


def _narrow_pairs():
    from skcontract.kernels import catalogue, specs
    narrow = [b for b in catalogue.all_entries() if b.FAMILY == "WgmmaPair" and b.bn == 64]
    return [specs.specialise(b, protocol="deterministic", a_layout="row", b_layout="row")
            for b in narrow]


def _fp64_vec():
    from dataclasses import replace

    from skcontract.kernels import catalogue as C
    from skcontract.kernels import specs
    w16 = C.Dmma("float64", 128, 64, 16, 3, 4, 2, mma_k=8, frag="vec")
    return [specs.specialise(w16, protocol="none", a_layout="row", b_layout="row"),
            specs.specialise(w16, protocol="none", a_layout="row", b_layout="col"),
            specs.specialise(replace(w16, bk=32, frag="vecdb"),
                             protocol="none", a_layout="row", b_layout="row")]


def _fp64_two_cta():
    from skcontract.kernels import catalogue as C
    from skcontract.kernels import specs
    entry = next(b for b in C.entries_for("float64") if b.min_cc == 90)
    return [specs.specialise(entry, protocol="deterministic", a_layout="row", b_layout="col")]


AUXILIARY = ("fold_copy", "relayout", "pad_rows", "embed", "outer", "small_batched",
             "depthwise", "depthwise_mma", "pointwise_packed", "merged_groups")
"""The kernels no catalogue entry names (skcontract.kernels modules with a HEADER and the
NAMES it instantiates): the copies and the direct kernels."""


def _auxiliary(names=AUXILIARY):
    """One compile_check.Source a module of ``names``: its header, every instantiation."""
    from skcontract.kernels import jit
    modules = [importlib.import_module(f"skcontract.kernels.{n}") for n in names]
    return [compile_check.Source(n, jit.inline_headers(m.HEADER), tuple(m.NAMES))
            for n, m in zip(names, modules)]


def _probe_builds():
    """The Wgmma probe builds of a single CTA's kernel and a pair's (sm_90a)."""
    from skcontract.kernels import catalogue, jit, specs
    entries = [next(b for b in catalogue.all_entries()
                    if b.FAMILY == family and b.dtype == "float16" and (b.bm, b.bn) == (64, 64))
               for family in ("Wgmma", "WgmmaPair")]
    out = []
    for probe in jit.PROBES:
        define = jit.PROBES[probe].removeprefix("-D")
        for entry in entries:
            spec = specs.specialise(entry, protocol="deterministic", a_layout="row",
                                    b_layout="row")
            out.append(compile_check.Source(
                f"probe_{probe}_{spec.name}", f"#define {define}\n" + jit.render_source(spec),
                (spec.name_expression,), min_cc=90))
    return out


def _trace_builds():
    """The traced Wgmma kernels of a single CTA, a pair and 3xTF32 (sm_90a)."""
    from skcontract.kernels import catalogue, jit, specs
    picks = (("Wgmma", "float16"), ("WgmmaPair", "float16"), ("WgmmaTf32x3", "float32"))
    entries = [next(b for b in catalogue.all_entries() if b.FAMILY == family and b.dtype == dtype
                  and (b.bm, b.bn) == (64, 64)) for family, dtype in picks]
    out = []
    for entry in entries:
        spec = specs.specialise(entry, protocol="deterministic", a_layout="row", b_layout="col")
        out.append(compile_check.Source(
            f"trace_{spec.name}", "#define SKCONTRACT_TRACE\n" + jit.render_source(spec),
            (spec.name_expression,), min_cc=90))
    return out


def _conj_dots():
    """The complex Dot entries' builds that read A, then B, conjugated, deterministic, on
    16-byte loads (the copies' widths are the conjugate-free builds')."""
    from dataclasses import replace

    from skcontract.kernels import catalogue as C
    from skcontract.kernels import specs
    out = []
    for dtype in ("complex64", "complex128"):
        for entry in C.DOT_CATALOGUE[dtype]:
            for conj in ((True, False), (False, True)):
                la, lb = entry.layouts()[0]
                out.append(specs.specialise(replace(entry, conj=conj), protocol="deterministic",
                                            a_layout=la, b_layout=lb, a_vec16=True,
                                            b_vec16=True))
    return out


BUILDS = {
    "test_sampled_specs_compile_without_spills": _sampled,
    "test_conjugating_dot_builds_compile": _conj_dots,
    "test_narrow_pairs_split_an_n_major_b_box_along_k": _narrow_pairs,
    "test_fp64_vec_fragment_entries": _fp64_vec,
    "test_compile_check_builds_each_spec_for_the_archs_it_is_offered_on": _fp64_two_cta,
    "test_each_auxiliary_kernel_compiles": _auxiliary,
    "test_the_probe_builds_compile": _probe_builds,
    "test_the_trace_build_compiles": _trace_builds,
}
"""What each test that reads :func:`built` compiles (KernelSpecs, or compile_check.Source
units for the kernels no spec names)."""


@pytest.fixture(scope="module")
def built(request):
    """compile_check.check()'s results, by (spec or source name, target), of what the
    selected tests of this module compile (:data:`BUILDS`), for sm_90a and sm_80 where each
    is offered: one call, so both cores stay busy to the end (the costliest compiles first,
    two worker processes started once), where a call a test left a core idle through its
    last compiles."""
    selected = {getattr(item, "originalname", None) for item in request.session.items
                if getattr(item, "module", None) is request.module}
    todo = {}
    for name, make in BUILDS.items():
        if name in selected:
            for item in make():
                assert todo.setdefault(item.name, item) == item, item.name  # one name, one unit
    return {(r.spec, r.arch): r for r in compile_check.check(list(todo.values()),
                                                             verbose=False)}


def _results(built, items, archs=compile_check.ARCHS):
    """The results of ``items`` (specs or sources) in :func:`built`, each for every one of
    ``archs`` it is offered on."""
    from skcontract.kernels.catalogue import ARCH_CC
    return [built[item.name, arch] for item in items for arch in archs
            if (item if isinstance(item, compile_check.Source)
                else item.entry).offered_on(ARCH_CC[arch])]


def _failures(results) -> str:
    return "\n".join(f"{r.spec} [{r.arch}]: {r.message[:500]}" for r in results if not r.ok)


def test_sampled_specs_compile_without_spills(built):
    """CI's compile check: the sample (``compile_check.sampled_specs()``, whose coverage the
    next test checks), each spec for sm_90a and sm_80 where its entry is offered, compiles
    with no spill, no fewer CTAs per SM than its entry declares and the registers its
    register split needs. ``python -m tools.compile_check`` compiles every catalogue entry,
    ``--all`` every spec (docs/benchmarks/compile-check-all.md)."""
    results = _results(built, _sampled())
    assert results and not _failures(results), _failures(results)


def test_conjugating_dot_builds_compile(built):
    """The complex Dot kernel's builds that read an operand conjugated (CONJ_A / CONJ_B:
    einsum's conj= on a memory-bound step) compile as the others do, no spills."""
    items = _conj_dots()
    assert {i.entry.conj for i in items} == {(True, False), (False, True)}
    assert all("_conj" in i.name for i in items)
    results = _results(built, items)
    assert results and not _failures(results), _failures(results)


def test_the_sample_covers_every_family_dtype_protocol_layout_copy_and_im2col():
    """What CI compiles stands for all the launcher can choose: per kernel family, the
    sample holds every dtype, fixup protocol (``entry.protocols()``), layout of each
    operand, 16-byte and element-wise copy of each operand, im2col A (aligned and not) and
    the merged-groups convolution kernels (each fixup) that ``specs.all_specs()`` holds, every register split (the register-trading Wgmma
    entries), the in-stage transposers (3xTF32 on MN-major operands) and each target the
    family is offered on; the cluster pairs are there. A family, dtype, protocol or layout
    added to the catalogue must show up in the sample (sampled_specs() picks it up by
    itself)."""
    from skcontract.kernels import catalogue, specs
    from skcontract.kernels.catalogue import ARCH_CC, VEC16_BYTES
    every, sample = specs.all_specs(), compile_check.sampled_specs()
    names = [s.name for s in sample]
    assert len(names) == len(set(names)) and set(names) <= {s.name for s in every}

    def features(spec_list):
        out = defaultdict(set)
        for s in spec_list:
            b, fam = s.entry, s.entry.FAMILY
            out[fam, "dtype"].add(b.dtype)
            out[fam, "protocol"].add(s.protocol)
            out[fam, "A layout"].add(s.a_layout)
            out[fam, "B layout"].add(s.b_layout)
            out[fam, "A copy"].add(s.a_vec * s.elem_bytes >= VEC16_BYTES)
            out[fam, "B copy"].add(s.b_vec * s.elem_bytes >= VEC16_BYTES)
            out[fam, "im2col"].add(s.im2col)
            if s.im2col:
                out[fam, "im2col A copy"].add(s.a_vec * s.elem_bytes >= VEC16_BYTES)
            if s.merged:
                out[fam, "merged groups"].add(s.protocol)
            out[fam, "transposes"].add(b.transposes(s))
            out[fam, "launch registers"].add(b.launch_registers)
            if hasattr(b, "register_split_of"):
                out[fam, "register split"].add(b.register_split_of(s))
                if s.merged:
                    out[fam, "merged register split"].add(b.register_split_of(s))
            out[fam, "targets"] |= {a for a in compile_check.ARCHS
                                    if b.offered_on(ARCH_CC[a])}
        return out

    want, got = features(every), features(sample)
    assert {k: v - got[k] for k, v in want.items() if v - got[k]} == {}
    # the same, spelt out from the catalogue itself
    entries = catalogue.all_entries()
    families = {b.FAMILY for b in entries}
    assert {s.entry.FAMILY for s in sample} == families >= {"Wgmma", "WgmmaPair", "WgmmaTf32x3"}
    for fam in families:
        mine = [b for b in entries if b.FAMILY == fam]
        chosen = [s for s in sample if s.entry.FAMILY == fam]
        assert {s.entry.dtype for s in chosen} == {b.dtype for b in mine}, fam
        assert {s.protocol for s in chosen} == {p for b in mine for p in b.protocols()}, fam
        assert any(s.im2col for s in chosen) == any(b.IM2COL for b in mine), fam
        for arch in compile_check.ARCHS:
            assert any(s.entry.offered_on(ARCH_CC[arch]) for s in chosen) == \
                any(b.offered_on(ARCH_CC[arch]) for b in mine), (fam, arch)
    assert any(s.entry.MAINLOOP.tf32x3 and s.entry.transposes(s) for s in sample
               if s.entry.FAMILY == "WgmmaTf32x3")
    trading = {(b.FAMILY, b.ctas_per_sm) for b in entries if getattr(b, "trades_registers", 0)}
    assert {(s.entry.FAMILY, s.entry.ctas_per_sm) for s in sample
            if getattr(s.entry, "trades_registers", 0)} == trading
    assert "cluster" in {s.protocol for s in sample}


SCALE_SOURCE = ("template <int N> __global__ void scale(float* x, float a, float b) {\n"
                "  x[threadIdx.x] = __fmaf_rn(x[threadIdx.x], a, b) * N;\n}\n")


def test_the_library_compiles_in_a_child_process_keeping_subnormals():
    """nvrtc.compile_isolated returns the cubin and lowered names the child built, with
    -ftz=false (another cubin than a -ftz=true build, which flushes float32 subnormals); a
    source NVRTC refuses is a CompileError that carries NVRTC's log."""
    from skcontract.kernels import jit
    options = jit.compile_options("sm_90a")
    assert "-ftz=false" in options
    built = nvrtc_compile.compile_isolated(SCALE_SOURCE, "scale", ["scale<2>"], options)
    assert built.lowered == {"scale<2>": "_Z5scaleILi2EEvPfff"}
    flushing = nvrtc_compile.compile_cubin(
        SCALE_SOURCE, "scale", ["scale<2>"],
        [o for o in options if o != "-ftz=false"] + ["-ftz=true"])
    assert built.cubin != flushing.cubin
    with pytest.raises(nvrtc_compile.CompileError, match="error"):
        nvrtc_compile.compile_isolated("__global__ void k( { }", "bad", [], options)


def test_the_compile_child_ignores_the_callers_folder(tmp_path, monkeypatch):
    """The child runs by path in its own folder: packages named skcontract or cuda in the
    caller's working directory cannot replace the ones it uses."""
    from skcontract.kernels import jit
    for name in ("skcontract", "cuda"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("raise ImportError('shadowed')\n")
    monkeypatch.chdir(tmp_path)
    built = nvrtc_compile.compile_isolated(SCALE_SOURCE, "scale", ["scale<2>"],
                                           jit.compile_options("sm_90a"))
    assert built.cubin


def _has_nvdisasm() -> bool:
    try:
        sass.find_nvdisasm()
        return True
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not _has_nvdisasm(), reason="nvdisasm (a developer tool) not installed")
def test_the_library_build_has_no_flushing_ffma():
    from skcontract.kernels import jit
    built = nvrtc_compile.compile_cubin(SCALE_SOURCE, "scale", ["scale<2>"],
                                        jit.compile_options("sm_90a"))
    text = sass.disassemble(built.cubin)
    assert re.search(r"\bFFMA\b", text) and "FFMA.FTZ" not in text


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("name", AUXILIARY)
def test_each_auxiliary_kernel_compiles(name, arch, built):
    """The kernels no catalogue entry names (the fold and relayout copies, the complex
    embedding, the outer-product, small-batched and depthwise kernels): every
    instantiation, both targets, no spill."""
    (result,) = _results(built, _auxiliary((name,)), (arch,))
    assert result.ok and result.spill_bytes == 0, result.message


def test_narrow_pairs_split_an_n_major_b_box_along_k(built):
    """A narrow pair's CTAs (BN = 64) each load half the k rows of an N-major B's one box
    (load_part's k-row parts, which the representative set, with B K-major for these
    entries, does not reach): both narrow pairs of both dtypes compile for sm_90a, no
    spill."""
    todo = _narrow_pairs()
    assert len(todo) == 4
    results = _results(built, todo, ("sm_90a",))
    assert len(results) == 4
    bad = [f"{r.spec}: {r.message[:500]}" for r in results if not r.ok or r.spill_bytes]
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
    sources = {}
    for spec in specs.representative_specs():
        sources.setdefault(spec.entry_header, jit.render_source(spec))
    assert set(sources) == {"sk_gemm.cuh", "sk_dot.cuh", "sk_wgmma.cuh", "sk_conv.cuh",
                            "sk_wgmma_conv.cuh"}
    for src in sources.values():
        assert '#include "' not in src
    for aux in _auxiliary():  # no catalogue entry
        sources[aux.name] = aux.source
    for h in jit.header_files():
        assert any(f"---- {h.name} ----" in src for src in sources.values()), h.name
    assert "---- mainloop_mma16.cuh ----" not in sources["sk_dot.cuh"]


def test_3xtf32_entries():
    """The 3xTF32 entries: the tf32 menu less the tiles whose two accumulators a thread (the
    tile's and the partial sums') do not fit, with half the stages, each stage twice the
    loaded boxes (their small parts), so every ring fills what the
    tf32 entry's fills; the 128 x 128 tile trades registers; the kernel's Cfg says TF32X3;
    the exact FFMA entries follow them in the key (where wgmma is not offered)."""
    from skcontract.kernels import catalogue as C
    from skcontract.kernels import specs
    x3 = [b for b in C.CATALOGUE[C.TF32X3] if isinstance(b, C.WgmmaTf32x3)]
    tf32 = {(b.bm, b.bn, b.ctas_per_sm): b for b in C.CATALOGUE[C.TF32]
            if isinstance(b, C.WgmmaTf32)}
    assert {(b.bm, b.bn, b.ctas_per_sm) for b in x3} == \
        {(128, 128, 1), (128, 64, 1), (64, 64, 1)} == set(tf32) - set(C.WgmmaTf32x3.MENU.left_out)
    for b in x3:
        t = tf32[b.bm, b.bn, b.ctas_per_sm]
        assert b.stages == t.stages // 2 and b.layouts() == C.LAYOUT_PAIRS
        assert t.layouts() == (("row", "col"),)  # tf32's read copies
        assert b.trades_registers == ((b.bm, b.bn) == (128, 128))
        assert b.efficiency == pytest.approx(3 * t.efficiency)
        assert (b.tma_dtype, t.tma_dtype) == ("float32", "tf32")
        spec = specs.specialise(b, protocol="none", a_layout="row", b_layout="col")
        t_spec = specs.specialise(t, protocol="none", a_layout="row", b_layout="col")
        # a stage: its loaded A and B boxes (twice for 3xTF32) and its mbarriers
        stage = (b.bm + b.bn) * b.bk * 4
        assert spec.smem_bytes - b.stages * (2 * stage + 2 * C.wgmma.MBARRIER_BYTES) == \
            t_spec.smem_bytes - t.stages * (stage + 2 * C.wgmma.MBARRIER_BYTES)
        assert "TF32X3 = true" in spec.cfg_source()
        assert "TF32X3 = false" in t_spec.cfg_source()
    # an MN-major operand turned in the stages: a `transposed` mbarrier a stage, 32-float
    # boxes, and the trading 128 x 128 entry's producer keeps registers for its transposers
    from skcontract.kernels.tma import load_box
    x128 = next(b for b in x3 if (b.bm, b.bn) == (128, 128))
    turned = specs.specialise(x128, protocol="deterministic", a_layout="row", b_layout="row")
    k_major = specs.specialise(x128, protocol="deterministic", a_layout="row", b_layout="col")
    assert x128.transposes(turned) and not x128.transposes(k_major)
    assert turned.smem_bytes - k_major.smem_bytes == x128.stages * C.wgmma.MBARRIER_BYTES
    assert "PRODUCER_REGS = 88;" in turned.cfg_source()
    assert "CONSUMER_REGS = 208;" in turned.cfg_source()
    assert "PRODUCER_REGS = 40;" in k_major.cfg_source()
    assert load_box(False, 1000, 128, 32, 1, 4) == (32, 32, 1)
    assert load_box(False, 1000, 128, 64, 1, 2) == (64, 64, 1)
    assert C.CATALOGUE[C.TF32X3][len(x3):] == C.CATALOGUE["float32"]
    assert C.entries_for("float32", "3xtf32", cc=80) == C.CATALOGUE["float32"]
    assert C.catalogue_key("float64", "3xtf32") == "float64"
    with pytest.raises(ValueError, match="'bf16x9'"):
        C.catalogue_key("float32", "bf16x9")


def test_tf32_and_int8_specs():
    """tf32 (float32 on wgmma for sm_90 and K-major operands, on mma_sync elsewhere) and int8
    (int32 accumulators / output) are catalogue entries, in the compiled lists, and chosen
    only where they should be."""
    from skcontract.kernels import catalogue as C
    from skcontract.kernels import specs
    wgmma, tf32 = C.CATALOGUE[C.TF32][0], C.CATALOGUE[C.TF32][-1]
    assert isinstance(wgmma, C.WgmmaTf32) and wgmma.layouts() == (("row", "col"),)
    assert wgmma.bk == 32 and wgmma.min_cc == 90 and not wgmma.tma_store
    assert all(s.entry.layouts() == (("row", "col"),) for s in specs.all_specs()
               if type(s.entry) is C.WgmmaTf32)
    spec = specs.specialise(tf32, protocol="none", a_layout="row", b_layout="row")
    assert isinstance(tf32, C.Tf32) and "MainloopTf32" in spec.cfg_source()
    assert C.entries_for("float32", precision="tf32", cc=80) == (tf32,)
    w8, i8 = C.CATALOGUE["int8"][0], C.CATALOGUE["int8"][-1]
    assert isinstance(w8, C.WgmmaInt8) and w8.layouts() == (("row", "col"),) and w8.bk == 128
    assert "WgmmaTile<128, 128, Acc>" in specs.specialise(
        w8, protocol="none", a_layout="row", b_layout="col").cfg_source()
    spec = specs.specialise(i8, protocol="none", a_layout="row", b_layout="row")
    assert (i8.dtype_out, i8.accumulator_dtype) == ("int32", "int32")
    assert "MainloopImma" in spec.cfg_source()
    assert C.entries_for("int8", cc=80) == (i8,)
    assert all(isinstance(b, C.Ffma) for b in C.entries_for("float32"))
    assert C.entries_for("float32", precision="tf32") == C.CATALOGUE[C.TF32]
    assert C.entries_for("float16", precision="tf32") == C.CATALOGUE["float16"]
    for bad in ("tf32", "3xtf32", "int16"):
        with pytest.raises(TypeError):
            C.entries_for(bad)
    with pytest.raises(ValueError):
        C.Imma("float16", 128, 128, 64, 4, 2, 4)
    with pytest.raises(ValueError, match="protocol"):
        specs.KernelSpec(i8, "aligned")
    # the cluster reduction is the Hopper family's alone
    assert "cluster" not in i8.protocols() and "cluster" not in tf32.protocols()
    with pytest.raises(ValueError, match="no 'cluster' kernel"):
        specs.KernelSpec(i8, "cluster")
    # the peers' shares arrive in the staging, grown to the tile's fp32 bytes where smaller,
    # and the entries whose ring leaves no room for that do not run the protocol
    wgmma = {(*b.tile, b.ctas_per_sm): b for b in C.entries_for("float16", cc=90)
             if type(b) is C.Wgmma}
    small = wgmma[64, 64, 64, 1]
    plain, cluster = (specs.specialise(small, protocol=p, a_layout="row", b_layout="row")
                      for p in ("arrival", "cluster"))
    staging = 64 * C.wgmma.WGMMA_EPI_PITCH * 4
    assert cluster.smem_bytes == plain.smem_bytes + 64 * 64 * 4 - staging + C.wgmma.MBARRIER_BYTES
    assert cluster.smem_bytes + C.SMEM_RESERVED_PER_CTA <= DeviceInfo.h200().smem_per_sm
    assert "cluster" in small.protocols() and "cluster" not in wgmma[128, 128, 64, 1].protocols()
    rep = specs.representative_specs()
    for family in (C.Tf32, C.Imma):
        chosen = [s for s in rep if isinstance(s.entry, family)]
        assert {s.protocol for s in chosen} == set(chosen[0].entry.protocols())
        assert {(s.a_layout, s.b_layout) for s in chosen} == {
            (a, b) for a in specs.LAYOUTS for b in specs.LAYOUTS}


def test_fp64_vec_fragment_entries(built):
    """Dmma.frag: "vec" / "vecdb" (MainloopDmmaVec) need mma_k=8, pad for their
    conflict-free 16-byte fragment loads and compile without spills (the transposed row/row,
    the row-permuted x-contiguous A and the scalar k-contiguous A fragment paths, one each;
    the none protocol keeps fixup.cuh out)."""
    from dataclasses import replace

    from skcontract.kernels import catalogue as C
    from skcontract.kernels import specs
    vec = [b for b in C.all_entries() if isinstance(b, C.Dmma) and b.frag != "scalar"]
    assert [(b.tile, b.frag, b.ctas_per_sm) for b in vec] == [
        ((128, 64, 32), "vec", 1), ((128, 64, 16), "vecdb", 2)]
    w16 = C.Dmma("float64", 128, 64, 16, 3, 4, 2, mma_k=8, frag="vec")
    spec = specs.specialise(w16, protocol="none", a_layout="row", b_layout="row")
    assert w16.name.endswith("_k8_vec") and "MainloopDmmaVec" in spec.cfg_source()
    scalar = specs.specialise(replace(w16, frag="scalar"), protocol="none", a_layout="row",
                              b_layout="row")
    assert "MainloopDmma16" in scalar.cfg_source()
    for bk in (16, 32):  # pitches: k-contiguous 8 (mod 16), x-contiguous 2 (mod 4) doubles
        e = replace(w16, bk=bk)
        assert (e.bk + e.pad(True)) % 16 == 8 and (e.bm + e.pad(False)) % 4 == 2
    for bad in (dict(mma_k=16), dict(mma_k=4), dict(frag="vector")):
        with pytest.raises(ValueError):
            replace(w16, **bad)
    todo = _fp64_vec()  # compiled by the `built` fixture
    assert todo[0].entry == w16 and todo[2].entry == replace(w16, bk=32, frag="vecdb")
    results = _results(built, todo)
    assert len(results) == 6 and not _failures(results), _failures(results)


def test_one_row_tiles_copy_x_contiguous_operands_by_element():
    """A 16-byte vector along a one-row tile's single row would straddle tiles: specialise()
    gives x-contiguous operands of such tiles element copies, aligned or not, and
    all_specs() lists each resulting kernel once."""
    from skcontract.kernels import catalogue as C
    from skcontract.kernels import specs
    gemv = next(b for b in C.entries_for("float32") if b.bm == 1)
    col_a = specs.specialise(gemv, protocol="none", a_layout="col", b_layout="row")
    row_a = specs.specialise(gemv, protocol="none", a_layout="row", b_layout="row")
    assert (col_a.a_vec, col_a.b_vec) == (1, 4) and (row_a.a_vec, row_a.b_vec) == (4, 4)
    assert specs.specialise(gemv, protocol="none", a_layout="col", b_layout="row",
                            a_vec16=False) == col_a
    names = [s.name for s in specs.all_specs()]
    assert len(names) == len(set(names)) and col_a.name in names


def test_specs_round_trip_through_json():
    """The compile check and the warmer hand specs to subprocesses as JSON."""
    import json

    from skcontract.kernels import specs
    for spec in specs.representative_specs():
        assert specs.KernelSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_occupancy_rule():
    """The occupancy the compile check derives from ptxas' report (sm_90a): registers per
    warp in units of 256, 1 KiB of shared memory reserved per CTA."""
    assert compile_check.occupancy(168, 256, 56064) == 1
    assert compile_check.occupancy(127, 256, 50688) == 2
    assert compile_check.occupancy(143, 128, 55296) == 3
    assert compile_check.occupancy(64, 256, 200 * 1024) == 1
    assert compile_check.occupancy(32, 128, 0) == 16


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


def test_sass_counts_fma_register_bank_conflicts():
    """Three reads in one bank conflict; RZ, constants, immediates and an operand the
    previous FFMA flagged .reuse in the same slot are not read from a bank."""
    listing = """
        /*0000*/                   FFMA R10, R1, R3, R11 ;
        /*0010*/                   FFMA R11, R1.reuse, R3, R5 ;
        /*0020*/                   FFMA R13, R1, R3, R5 ;
        /*0030*/               @P0 FFMA.FTZ R12, -R5, R7, R9 ;
        /*0040*/                   FFMA R15, R5, c[0x0][0x10], R7 ;
        /*0050*/                   FFMA R15, R5, 0.5, RZ ;
        /*0060*/                   FFMA R16, R1.reuse, R3, R7 ;
        /*0070*/                   IADD3 R2, R2, 0x1, RZ ;
        /*0080*/                   FFMA R17, R1, R3, R7 ;
"""
    instrs, _ = sass.parse(listing)
    # 0x00: R1, R3, R11 all bank 1; 0x10: likewise; 0x20: R1 from the reuse cache, two
    # reads; 0x30: predicated, negated, .FTZ, three in bank 1; 0x40 / 0x50: a constant, an
    # immediate, RZ; 0x80: the IADD3 between empties the reuse cache (three in bank 1)
    assert sass.fma_bank_conflicts(instrs, 0, 0x80) == (8, 5)
    assert sass.fma_bank_conflicts(instrs, 0x20, 0x30) == (2, 2)


def test_compile_check_builds_each_spec_for_the_archs_it_is_offered_on(built):
    """min_cc: the fp64 two-CTA entry (Hopper only) is compiled for sm_90a, not sm_80, by the
    compile check (the `built` fixture's check() for both targets), and there it fits the 2
    CTAs per SM it declares."""
    (spec,) = _fp64_two_cta()
    entry = spec.entry
    results = [built[key] for key in built if key[0] == spec.name]
    assert [(r.arch, r.ok, r.occupancy) for r in results] == [("sm_90a", True, 2)]
    assert entry.offered_on(90) and not entry.offered_on(80) and entry.offered_on(None)


def test_vec16_only_entries_specialise_aligned_only():
    """The fp64 two-CTA entry spills in misaligned specializations: all_specs() (what the
    compile check and the launcher can reach) lists only its 16-byte aligned ones."""
    from skcontract.kernels import catalogue as C
    from skcontract.kernels import specs
    entry = next(b for b in C.entries_for("float64") if b.vec16_only)
    mine = [s for s in specs.all_specs() if s.entry == entry]
    dense = [s for s in mine if not s.im2col]
    assert len(dense) == len(entry.protocols()) * len(specs.LAYOUTS) ** 2
    assert len(mine) - len(dense) == len(entry.protocols())  # its im2col entry, aligned only
    assert all(s.a_vec == 2 and s.b_vec == 2 for s in mine)
    assert not C.entries_for("float64")[0].vec16_only


def test_probe_builds_are_asked_for_by_name(monkeypatch):
    """SKCONTRACT_PROBE names a probe build (its define among the options, in the cache key
    through them); anything else is refused, naming the value."""
    from skcontract.kernels import jit
    for unset in ("", "0", "none"):
        monkeypatch.setenv("SKCONTRACT_PROBE", unset)
        assert jit.probe() is None
    monkeypatch.setenv("SKCONTRACT_PROBE", "mma")
    assert jit.probe() == "mma"
    assert "-DSKCONTRACT_PROBE_MMA_ONLY" in jit.compile_options("sm_90a", probe_build="mma")
    assert not any("PROBE" in o for o in jit.compile_options("sm_90a"))
    monkeypatch.setenv("SKCONTRACT_PROBE", "loadz")
    with pytest.raises(ValueError, match="loadz"):
        jit.probe()


@pytest.mark.parametrize("probe", ["loads", "mma"])
def test_the_probe_builds_compile(probe, built):
    """The Wgmma probe builds (one half of the mainloop, for tools.time_gemm --probe) of a
    single CTA's kernel and a pair's: sm_90a, no spill."""
    todo = [s for s in _probe_builds() if s.name.startswith(f"probe_{probe}_")]
    assert len(todo) == 2
    results = _results(built, todo)
    assert [r.arch for r in results] == ["sm_90a"] * 2
    assert all(r.ok and r.spill_bytes == 0 for r in results), _failures(results)


def test_the_trace_build_compiles(built):
    """The traced Wgmma kernels (tools.trace_kernel: phase and k-tile stamps) of a single CTA,
    a pair and 3xTF32: sm_90a, no spill."""
    results = _results(built, _trace_builds())
    assert [r.arch for r in results] == ["sm_90a"] * 3
    assert all(r.ok and r.spill_bytes == 0 for r in results), _failures(results)


class _FakeRawModule:
    """Stands in for cupy.RawModule(path=...): loads the file, knows the lowered names."""

    def __init__(self, path):
        data = open(path, "rb").read()
        if not data.startswith(b"\x7fELF"):
            raise _FakeDriverError("CUDA_ERROR_INVALID_IMAGE")
        self.path = path

    def get_function(self, name):
        if not name.startswith("_Z"):
            raise _FakeDriverError(f"CUDA_ERROR_NOT_FOUND: {name}")
        return name


class _FakeDriverError(RuntimeError):
    pass


def test_the_kernel_cache_compiles_once_rebuilds_damage_and_survives_a_read_only_folder(
        tmp_path, monkeypatch):
    """jit.load_module on a stand-in CuPy: a miss compiles and keeps <key>.cubin and
    <key>.json, a hit loads without compiling, a damaged entry is compiled again, and a
    folder it cannot write gives a warning and a temporary folder."""
    import types
    import warnings
    from skcontract.kernels import jit
    fake = types.ModuleType("cupy")
    fake.RawModule = lambda path: _FakeRawModule(path)
    fake.cuda = types.SimpleNamespace(driver=types.SimpleNamespace(
        CUDADriverError=_FakeDriverError))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    compiles = []
    real = jit.compile_isolated
    monkeypatch.setattr(jit, "compile_isolated",
                        lambda *a: compiles.append(a[1]) or real(*a))
    monkeypatch.setenv("SKCONTRACT_CACHE_DIR", str(tmp_path / "cache"))
    options = jit.compile_options("sm_90a")

    def load():
        return jit.load_module(SCALE_SOURCE, "scale", ["scale<2>"], options, "k1")

    assert load().get_function("scale<2>") == "_Z5scaleILi2EEvPfff"
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["k1.cubin", "k1.json"]
    load()
    assert len(compiles) == 1  # the hit compiled nothing
    (tmp_path / "cache" / "k1.cubin").write_bytes(b"truncated")
    assert load().get_function("scale<2>") == "_Z5scaleILi2EEvPfff"
    assert len(compiles) == 2
    (tmp_path / "cache" / "k1.json").write_text("{not json")
    load()
    assert len(compiles) == 3
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("SKCONTRACT_CACHE_DIR", str(blocked))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = jit.load_module(SCALE_SOURCE, "scale", ["scale<2>"], options, "k2")
    assert module.get_function("scale<2>") == "_Z5scaleILi2EEvPfff"
    assert any("cannot write the kernel cache" in str(w.message) for w in caught)
    jit.load_module(SCALE_SOURCE, "scale", ["scale<2>"], options, "k2")
    assert len(compiles) == 4  # the temporary folder keeps it for the process
