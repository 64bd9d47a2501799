"""GPU correctness of the two opt-in / integer tensor-core paths of ``gemm``.

* tf32 (``gemm(..., allow_tf32=True)`` on float32): wgmma m64nNk8.tf32 on sm_90 (K-major
  operands, copied so where they are not), ``mma.m16n8k8.tf32`` elsewhere, against a float64
  reference, relative Frobenius error <= TOL_TF32 (10-bit mantissa operands, fp32
  accumulation: ~5e-4 typical); exact FFMA float32 stays the default.
* int8 (int32 accumulation and output; s8 wgmma on sm_90 with K-major operands, copied so
  where they are not, ``mma.m16n8k32.s8`` elsewhere): exact equality with an int64
  matmul reduced modulo 2^32, every layout / fixup / mode; einsum over int8 CuPy arrays equals
  numpy.einsum bit for bit (int8 wraparound).

Outputs are poisoned first (NaN for float32, 0xDEADBEEF for int32) so unwritten elements fail.
"""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import TOL, as_bytes, poisoned, rand, rel_error, schedule_gemm, to64

TOL_TF32 = 5e-3
TF32_VISIBLE = 1e-5  # a tf32 result of a long random sum is never this close to exact
POISON_I32 = np.int32(-559038737)  # 0xDEADBEEF

LAYOUTS = [("C", "C"), ("F", "F"), ("C", "F"), ("F", "C")]
EDGE_SHAPES = [  # (batch, m, n, k)
    (1, 1, 1, 1),
    (1, 1, 300, 40),        # M = 1
    (1, 300, 1, 72),        # N = 1
    (1, 128, 128, 32),      # one tile, one k-tile (tf32 BK)
    (1, 128, 128, 64),      # one tile, one k-tile (int8 BK)
    (1, 64, 64, 16),        # K < BK
    (1, 200, 136, 100),     # K not a multiple of BK
    (1, 257, 383, 3000),    # ragged, long K: Stream-K splits
    (1, 1024, 768, 256),    # many tiles
    (3, 130, 70, 900),      # batched
]
FIXES = [(mode, red) for mode in ("data_parallel", "stream_k", "hybrid", "split_k", "aligned")
         for red in ("deterministic", "atomic")]


def _gemm(*args, **kwargs):
    from skcontract.kernels.gemm import gemm
    return gemm(*args, **kwargs)


def _order(x, order):
    import cupy
    if order == "F":
        return cupy.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)
    return cupy.ascontiguousarray(x)


def _shapes(batch, m, n, k):
    return ((batch, m, k) if batch > 1 else (m, k)), ((batch, k, n) if batch > 1 else (k, n)), \
        ((batch, m, n) if batch > 1 else (m, n))


def _last_plan_spec():
    """Spec of the launch gemm() planned last (its launches are kept in insertion order)."""
    from skcontract.kernels import gemm as g
    return list(g._LAUNCHES.values())[-1].spec


# ---- tf32 ----------------------------------------------------------------------------------
def _check_tf32(batch, m, n, k, *, layout=("C", "C"), mode="stream_k",
                reduction="deterministic", out_order="C", seed=0, tol=TOL_TF32):
    import cupy
    sa, sb, sc = _shapes(batch, m, n, k)
    a = rand(sa, "float32", layout[0], seed)
    b = rand(sb, "float32", layout[1], seed + 1)
    out = poisoned(sc, a, out_order)
    _gemm(a, b, out, mode=mode, reduction=reduction, allow_tf32=True)
    err = rel_error(out, cupy.matmul(to64(a), to64(b)))
    assert err <= tol, ("tf32", batch, m, n, k, layout, mode, reduction, out_order, err)
    return out, err


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fix", FIXES)
def test_tf32_layouts_fixups_edges(layout, fix):
    for batch, m, n, k in EDGE_SHAPES:
        _check_tf32(batch, m, n, k, layout=layout, mode=fix[0], reduction=fix[1])


def _tf32_family() -> str:
    """The family that runs aligned tf32 products on the current device."""
    import cupy
    from skcontract.kernels.resolve import compute_capability, device_info
    cc = compute_capability(device_info(cupy.cuda.runtime.getDevice()))
    return "WgmmaTf32" if cc >= 90 else "Tf32"


def test_tf32_is_used_only_when_allowed():
    """allow_tf32=True runs a tf32 tensor-core kernel (its rounding is visible);
    the default runs exact FFMA (tf32 is never used silently)."""
    import cupy
    from skcontract.kernels import gemm as g
    m, n, k = 512, 384, 4096
    a, b = rand((m, k), "float32", "C", 20), rand((k, n), "float32", "C", 21)
    ref = cupy.matmul(to64(a), to64(b))
    g.clear_plans()
    out = poisoned((m, n), a)
    _gemm(a, b, out, mode="stream_k")
    assert _last_plan_spec().entry.FAMILY == "Ffma"
    assert rel_error(out, ref) <= TOL["float32"]
    out = poisoned((m, n), a)
    _gemm(a, b, out, mode="stream_k", allow_tf32=True)
    spec = _last_plan_spec()
    assert spec.entry.FAMILY == _tf32_family() and spec.dtype_in == "float32", spec.name
    err = rel_error(out, ref)
    assert TF32_VISIBLE < err <= TOL_TF32, err
    # and back: the plan cache keys on allow_tf32
    out = poisoned((m, n), a)
    _gemm(a, b, out, mode="stream_k", allow_tf32=False)
    assert rel_error(out, ref) <= TOL["float32"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("out_order", ["C", "F"])
def test_tf32_runs_wgmma_in_every_layout(layout, out_order):
    """On sm_90 aligned float32 operands of any layout run on tf32 wgmma: the operands that
    are not K-major are copied into that layout first, then the Wgmma kernel runs."""
    for batch, m, n, k in [(1, 300, 500, 2048), (2, 130, 70, 900), (1, 1024, 768, 256)]:
        _, err = _check_tf32(batch, m, n, k, layout=layout, mode="auto", out_order=out_order)
        spec = _last_plan_spec()
        assert spec.entry.FAMILY == _tf32_family(), spec.name
        assert err > TF32_VISIBLE, err


def _k_major_entries():
    from skcontract.kernels import catalogue
    return [b for key in (catalogue.TF32, "int8") for b in catalogue.CATALOGUE[key]
            if ("row", "row") not in b.layouts()]


@pytest.mark.parametrize("entry", _k_major_entries(), ids=lambda b: b.name)
def test_every_k_major_wgmma_entry(entry):
    """Each tf32 / int8 Wgmma entry forced on a product of more than a wave of its tiles,
    under the deterministic and atomic fixups (and arrival where it runs it), B copied or
    not."""
    import cupy
    m, n = 24 * entry.bm, 12 * entry.bn
    k = 6 * entry.bk + 8 * (4 if entry.dtype == "int8" else 1)  # a ragged last k-tile
    for red in ("deterministic", "atomic", "arrival"):
        if red not in entry.protocols():
            continue
        for b_order in ("F", "C"):
            kw = dict(tile=(*entry.tile, entry.ctas_per_sm), mode="stream_k", reduction=red)
            if entry.dtype == "int8":
                a, b = rand_i8((m, k), "C", 1), rand_i8((k, n), b_order, 2)
                out = poisoned_i32((m, n))
                _gemm(a, b, out, **kw)
                assert np.array_equal(cupy.asnumpy(out), ref_i32(a, b)), (red, b_order)
            else:
                a, b = rand((m, k), "float32", "C", 1), rand((k, n), "float32", b_order, 2)
                out = poisoned((m, n), a)
                _gemm(a, b, out, allow_tf32=True, **kw)
                err = rel_error(out, cupy.matmul(to64(a), to64(b)))
                assert err <= TOL_TF32, (red, b_order, err)
            assert _last_plan_spec().entry == entry, _last_plan_spec().name


def test_relayout_copies_are_dense_and_equal():
    """relayout.col_major / row_major (the tf32 operands' copies, and the convolutions'
    NCHW ones): the same values, dense in the asked order, from views of any strides, of 1-,
    2-, 4- and 8-byte elements (16-byte vectors for 2- and 4-byte ones where the rows allow
    them)."""
    import cupy
    from skcontract.kernels import relayout
    entry = cupy.arange(4 * 70 * 90, dtype=cupy.float32).reshape(4, 70, 90)
    views = [entry[0], entry[0, :33, :65], entry, entry[:, ::2, 1:], entry[1].T, entry[:1, :1, :1],
             entry.astype(cupy.float64)[:, 3:, :40], entry[:, :0]]
    # the 16-byte vector copy: whole 64 x 64 blocks, ragged ones, a view that starts inside
    # a row, a batch, a transposed view (row_major copies its transpose)
    wide = cupy.arange(3 * 132 * 200, dtype=cupy.float32).reshape(3, 132, 200)
    vec_views = [wide[0, :128, :192], wide[0], wide[:, 4:68, 8:196], wide, wide[1].T]
    half = (wide % 2048).astype(cupy.float16)  # exact in float16
    half_views = [half[0, :128, :192], half[:, 8:72, 8:184], half[:, :128], half[1].T]
    assert all(relayout._vectors(v) for v in vec_views[:4] + half_views[:3])
    assert not relayout._vectors(half)  # 132 rows: not whole vectors of 8
    assert not relayout._vectors(entry[0]) and not relayout._vectors(wide[0, :, 1:])
    assert not relayout._vectors(half[:, 4:68, 4:196])  # rows start off 16 bytes
    small = [entry.astype(cupy.int8)[:, 1:, ::3], half[:, 4:68, 4:196], half[:, ::3, 5:]]
    for x in views + vec_views + half_views + small:
        for fn, order in ((relayout.col_major, "F"), (relayout.row_major, "C")):
            y = fn(x)
            assert y.shape == x.shape and bool((y == x).all()), (x.shape, x.strides, order)
            mat = y if x.ndim == 2 else y[0]
            assert mat.flags.f_contiguous if order == "F" else mat.flags.c_contiguous


@pytest.mark.parametrize("mode", ["auto", "data_parallel", "stream_k", "hybrid", "split_k",
                                  "aligned"])
@pytest.mark.parametrize("reduction", ["deterministic", "atomic"])
def test_tf32_modes(mode, reduction):
    for batch, m, n, k in [(1, 300, 500, 2048), (1, 1000, 1000, 1000), (1, 128, 128, 8192),
                           (2, 256, 384, 1536), (1, 33, 2000, 4096)]:
        _check_tf32(batch, m, n, k, mode=mode, reduction=reduction)


def test_tf32_unaligned_leading_dimensions():
    """Odd leading dimensions / offsets take the 4-byte cp.async loader (row and col major)."""
    import cupy
    m, n, k = 190, 170, 530
    a_full = rand((m, k + 3), "float32", "C", 3)
    b_full = rand((k + 1, n + 5), "float32", "C", 4)
    a, b = a_full[:, 1:k + 1], b_full[1:, 2:n + 2]
    for red in ("deterministic", "atomic"):
        out = poisoned((m, n), a)
        _gemm(a, b, out, mode="stream_k", reduction=red, allow_tf32=True)
        assert rel_error(out, cupy.matmul(to64(a), to64(b))) <= TOL_TF32, red
    af = rand((k + 3, m + 1), "float32", "C", 5).T    # column-major, ld = m + 1
    bf = rand((n + 5, k + 1), "float32", "C", 6).T    # column-major, ld = k + 1
    a, b = af[1:, 1:k + 1], bf[1:, 2:n + 2]
    out = poisoned((m, n), a)
    _gemm(a, b, out, mode="hybrid", allow_tf32=True)
    assert rel_error(out, cupy.matmul(to64(a), to64(b))) <= TOL_TF32


@pytest.mark.parametrize("fix", [("stream_k", "deterministic"), ("hybrid", "atomic"),
                                 ("aligned", "deterministic")])
def test_tf32_alpha_beta_col_major_out(fix):
    import cupy
    m, n, k = 300, 200, 1500
    a, b = rand((m, k), "float32", "C", 5), rand((k, n), "float32", "F", 6)
    for order in ("C", "F"):
        c0 = rand((m, n), "float32", order, 7)
        ref = 2.0 * cupy.matmul(to64(a), to64(b)) + 0.5 * to64(c0)
        c = c0.copy(order=order)
        _gemm(a, b, c, alpha=2.0, beta=0.5, mode=fix[0], reduction=fix[1], allow_tf32=True)
        assert rel_error(c, ref) <= TOL_TF32, order
        _check_tf32(1, m, n, k, mode=fix[0], reduction=fix[1], out_order=order)


def test_tf32_broadcast_batch():
    import cupy
    m, n, k, batch = 100, 150, 2000, 4
    a = rand((m, k), "float32", "C", 8)
    b = rand((batch, k, n), "float32", "C", 9)
    out = poisoned((batch, m, n), b)
    _gemm(a, b, out, mode="stream_k", allow_tf32=True)
    assert rel_error(out, cupy.matmul(to64(a)[None], to64(b))) <= TOL_TF32


@pytest.mark.parametrize("mode", ["stream_k", "hybrid", "aligned", "split_k"])
@pytest.mark.parametrize("precision,tol", [("tf32", TOL_TF32), ("3xtf32", TOL["float32"])])
def test_tf32_deterministic_bitwise(mode, precision, tol):
    import cupy
    m, n, k = 700, 600, 6000
    a, b = rand((m, k), "float32", "C", 10), rand((k, n), "float32", "C", 11)
    outs = []
    for _ in range(10):
        out = poisoned((m, n), a)
        _gemm(a, b, out, mode=mode, reduction="deterministic", precision=precision)
        outs.append(as_bytes(out))
    assert all(o == outs[0] for o in outs), f"deterministic {precision} changed between runs"
    assert rel_error(out, cupy.matmul(to64(a), to64(b))) <= tol


# ---- int8 ----------------------------------------------------------------------------------
def rand_i8(shape, order="C", seed=0):
    import cupy
    rs = cupy.random.RandomState(seed)
    return _order(rs.randint(-128, 128, size=shape).astype(cupy.int8), order)


def poisoned_i32(shape, order="C"):
    import cupy
    return _order(cupy.full(shape, POISON_I32, dtype=cupy.int32), order)


def ref_i32(a, b, alpha=1, beta=0, c=None):
    """alpha * a @ b + beta * c in int64 on the host, reduced modulo 2^32 to int32."""
    import cupy
    r = np.matmul(cupy.asnumpy(a).astype(np.int64), cupy.asnumpy(b).astype(np.int64))
    r = r * alpha
    if beta:
        r = r + beta * cupy.asnumpy(c).astype(np.int64)
    return ((r + 2**31) % 2**32 - 2**31).astype(np.int32)


def _check_i8(batch, m, n, k, *, layout=("C", "C"), mode="stream_k", reduction="deterministic",
              out_order="C", seed=0):
    import cupy
    sa, sb, sc = _shapes(batch, m, n, k)
    a, b = rand_i8(sa, layout[0], seed), rand_i8(sb, layout[1], seed + 1)
    out = poisoned_i32(sc, out_order)
    got = _gemm(a, b, out, mode=mode, reduction=reduction)
    assert got is out
    want = ref_i32(a, b)
    g = cupy.asnumpy(out)
    bad = int((g != want).sum())
    assert bad == 0, ("int8", batch, m, n, k, layout, mode, reduction, out_order, bad)
    return out


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fix", FIXES)
def test_int8_layouts_fixups_edges(layout, fix):
    for batch, m, n, k in EDGE_SHAPES:
        _check_i8(batch, m, n, k, layout=layout, mode=fix[0], reduction=fix[1])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("out_order", ["C", "F"])
def test_int8_runs_wgmma_in_every_layout(layout, out_order):
    """On sm_90 int8 operands whose rows of K bytes lie on 16 bytes run on s8 wgmma in any
    layout (copied K-major first where they are not), alpha and beta in int32 included."""
    import cupy
    family = "WgmmaInt8" if _tf32_family() == "WgmmaTf32" else "Imma"
    for batch, m, n, k in [(1, 300, 500, 2048), (2, 130, 70, 896), (1, 1024, 768, 256)]:
        _check_i8(batch, m, n, k, layout=layout, mode="auto", out_order=out_order)
        assert _last_plan_spec().entry.FAMILY == family, _last_plan_spec().name
    m, n, k = 200, 136, 1024
    a, b = rand_i8((m, k), layout[0], 7), rand_i8((k, n), layout[1], 8)
    c = _order(cupy.asarray(rand_i8((m, n), "C", 9), dtype=cupy.int32), out_order)
    want = ref_i32(a, b, 3, -2, c)
    _gemm(a, b, c, alpha=3, beta=-2, mode="stream_k")
    assert np.array_equal(cupy.asnumpy(c), want)


@pytest.mark.parametrize("mode", ["auto", "data_parallel", "stream_k", "hybrid", "split_k",
                                  "aligned"])
@pytest.mark.parametrize("reduction", ["deterministic", "atomic"])
def test_int8_modes(mode, reduction):
    # K <= 8192: |sum| <= 128 * 128 * 8192 = 2^27, no int32 overflow
    for batch, m, n, k in [(1, 300, 500, 2048), (1, 1000, 1000, 1000), (1, 128, 128, 8192),
                           (2, 256, 384, 1536), (1, 33, 2000, 4096)]:
        _check_i8(batch, m, n, k, mode=mode, reduction=reduction)


def test_int8_default_output_is_int32():
    import cupy
    a, b = rand_i8((70, 300), "C", 1), rand_i8((300, 90), "C", 2)
    out = _gemm(a, b, mode="stream_k")
    assert out.dtype == cupy.int32 and out.shape == (70, 90)
    assert np.array_equal(cupy.asnumpy(out), ref_i32(a, b))
    with pytest.raises(TypeError):
        _gemm(a, b, cupy.empty((70, 90), cupy.int8))
    with pytest.raises(ValueError):
        _gemm(a, b, alpha=0.5)


def test_int8_unaligned_leading_dimensions():
    """Odd leading dimensions / offsets take the byte-wise loader."""
    import cupy
    m, n, k = 190, 170, 530
    a_full, b_full = rand_i8((m, k + 3), "C", 3), rand_i8((k + 1, n + 5), "C", 4)
    a, b = a_full[:, 1:k + 1], b_full[1:, 2:n + 2]
    for red in ("deterministic", "atomic"):
        out = poisoned_i32((m, n))
        _gemm(a, b, out, mode="stream_k", reduction=red)
        assert np.array_equal(cupy.asnumpy(out), ref_i32(a, b)), red
    # column-major slices of a column-major buffer
    af, bf = rand_i8((k + 3, m), "C", 5).T, rand_i8((n + 5, k + 1), "C", 6).T
    a, b = af[1:, 1:k + 1], bf[1:, 2:n + 2]
    out = poisoned_i32((m - 1, n))
    _gemm(a, b, out, mode="hybrid")
    assert np.array_equal(cupy.asnumpy(out), ref_i32(a, b))


@pytest.mark.parametrize("fix", [("stream_k", "deterministic"), ("stream_k", "atomic"),
                                 ("aligned", "deterministic"), ("split_k", "atomic")])
def test_int8_alpha_beta_wrap_col_major_out(fix):
    """Integer alpha / beta in int32; large alpha makes the epilogue wrap modulo 2^32."""
    import cupy
    m, n, k = 300, 200, 1500
    a, b = rand_i8((m, k), "C", 5), rand_i8((k, n), "F", 6)
    for order in ("C", "F"):
        for alpha, beta in [(3, -2), (1 << 20, 7)]:
            c0 = _order(cupy.random.RandomState(7).randint(-2**31, 2**31 - 1, size=(m, n),
                                                           dtype=np.int64).astype(cupy.int32),
                        order)
            c = c0.copy(order=order)
            _gemm(a, b, c, alpha=alpha, beta=beta, mode=fix[0], reduction=fix[1])
            want = ref_i32(a, b, alpha, beta, c0)
            assert np.array_equal(cupy.asnumpy(c), want), (order, alpha, beta)
        _check_i8(1, m, n, k, mode=fix[0], reduction=fix[1], out_order=order)


def test_int8_broadcast_batch():
    import cupy
    m, n, k, batch = 100, 150, 2000, 4
    a, b = rand_i8((m, k), "C", 8), rand_i8((batch, k, n), "C", 9)
    out = poisoned_i32((batch, m, n))
    _gemm(a, b, out, mode="stream_k")
    want = ref_i32(cupy.broadcast_to(a, (batch, m, k)), b)
    assert np.array_equal(cupy.asnumpy(out), want)


@pytest.mark.parametrize("mode", ["stream_k", "hybrid", "aligned", "split_k"])
@pytest.mark.parametrize("reduction", ["deterministic", "atomic"])
def test_int8_bitwise(mode, reduction):
    """Integer sums are exact: every protocol (atomic included) is bitwise reproducible."""
    import cupy
    m, n, k = 700, 600, 6000
    a, b = rand_i8((m, k), "C", 10), rand_i8((k, n), "C", 11)
    outs = []
    for _ in range(10):
        out = poisoned_i32((m, n))
        _gemm(a, b, out, mode=mode, reduction=reduction)
        outs.append(cupy.asnumpy(out).tobytes())
    assert all(o == outs[0] for o in outs)
    assert np.array_equal(cupy.asnumpy(out), ref_i32(a, b))


# ---- both: the longest chain of waiting splits ---------------------------------------------
@pytest.mark.parametrize("kind", ["tf32", "int8"])
def test_worst_case_coresidency(kind):
    import cupy
    from skcontract.kernels import catalogue, jit, specs
    from skcontract.kernels.gemm import device_info
    from skcontract.schedule.heuristics import MIN_ITERS_PER_SPLIT
    entry = catalogue.CATALOGUE[kind][0]
    b_order = "F" if ("row", "row") not in entry.layouts() else "C"  # K-major-only entries
    kern = jit.get_kernel(specs.specialise(entry, protocol="deterministic", a_layout="row",
                                           b_layout="col" if b_order == "F" else "row"))
    assert kern.occupancy >= entry.ctas_per_sm
    dev = device_info(cupy.cuda.runtime.getDevice()).with_occupancy(entry.ctas_per_sm)
    resident = dev.resident_ctas
    m, n = entry.bm, entry.bn
    k = entry.bk * MIN_ITERS_PER_SPLIT * resident
    dtype = "float32" if kind == "tf32" else "int8"
    sched = schedule_gemm(m, n, k, device=dev, mode="stream_k",
                          tile=(entry.bm, entry.bn, entry.bk), grid=resident,
                          reduction="deterministic", dtype=dtype)
    assert sched.grid == resident and len(sched.table) >= resident
    if kind == "tf32":
        a, b = rand((m, k), "float32", "C", 12), rand((k, n), "float32", b_order, 13)
        out = poisoned((m, n), a)
        _gemm(a, b, out, schedule=sched, allow_tf32=True)
        cupy.cuda.runtime.deviceSynchronize()
        assert _last_plan_spec().entry == entry
        assert rel_error(out, cupy.matmul(to64(a), to64(b))) <= 4 * TOL_TF32
    else:
        a, b = rand_i8((m, k), "C", 12), rand_i8((k, n), b_order, 13)
        out = poisoned_i32((m, n))
        _gemm(a, b, out, schedule=sched)
        assert _last_plan_spec().entry == entry
        cupy.cuda.runtime.deviceSynchronize()
        assert np.array_equal(cupy.asnumpy(out), ref_i32(a, b))


# ---- int8 einsum ---------------------------------------------------------------------------
EINSUM_CASES = [
    ("ij,jk->ik", [(300, 200), (200, 170)]),
    ("ji,jk->ik", [(200, 300), (200, 170)]),
    ("ij,kj->ik", [(129, 65), (77, 65)]),
    ("bij,bjk->bik", [(6, 65, 129), (6, 129, 33)]),
    ("ij,j->i", [(513, 257), (257,)]),
    ("i,i->", [(4099,), (4099,)]),
    ("ij,jk,kl->il", [(64, 96), (96, 32), (32, 80)]),
    ("abcd,cdef->abef", [(6, 7, 8, 9), (8, 9, 5, 4)]),
    ("ij,ij->ij", [(31, 37), (31, 37)]),
    ("ii->i", [(77, 77)]),
    ("ij->", [(300, 200)]),
]


@pytest.mark.parametrize("subscripts,shapes", EINSUM_CASES)
def test_int8_einsum_matches_numpy(subscripts, shapes):
    import cupy

    import skcontract
    rng = np.random.default_rng(len(subscripts) + sum(map(len, shapes)))
    ops = [rng.integers(-128, 128, size=s).astype(np.int8) for s in shapes]
    want = np.einsum(subscripts, *ops)
    got = skcontract.einsum(subscripts, *[cupy.asarray(o) for o in ops])
    got = cupy.asnumpy(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert np.array_equal(got, want)


def test_int8_einsum_runs_on_the_kernel():
    """The GEMM step of an int8 einsum launches an int8 kernel (not cupy.matmul)."""
    import cupy

    import skcontract
    from skcontract.kernels.launch import record_launches
    a = cupy.asarray(np.random.default_rng(1).integers(-128, 128, (256, 300)).astype(np.int8))
    b = cupy.asarray(np.random.default_rng(2).integers(-128, 128, (300, 200)).astype(np.int8))
    with record_launches() as launched:
        got = skcontract.einsum("ij,jk->ik", a, b)
    assert launched and all("_int8_" in x.kernel for x in launched), launched
    assert np.array_equal(cupy.asnumpy(got),
                          np.einsum("ij,jk->ik", cupy.asnumpy(a), cupy.asnumpy(b)))
