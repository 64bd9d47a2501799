"""GPU correctness of the opt-in mainloop variants that are not in the heuristic menu:
fp32 ``KernelSpec.ffma="kmajor"`` (MainloopFfmaKMajor, ``time_variants.kmajor_variants``) and
fp64 ``KernelSpec.frag="vec"/"vecdb"`` (MainloopDmmaVec, ``time_variants.vec_variants``).

Each variant is forced as the only base of its dtype and run on every A/B layout (kmajor:
k-contiguous operands go through the shared-memory transpose; vec: A row-major with B
row-major runs transposed), every fixup protocol, edge and ragged shapes (M = 1, N = 1, one
tile, K < BK, K not a multiple of BK, ragged Stream-K splits, a batch) and misaligned leading
dimensions, against a float64 reference with NaN-poisoned outputs; each run checks that the
forced kernel is the one that ran.
"""
from __future__ import annotations

import pytest

from .helpers import TOL, poisoned, rand, rel_error, to64
from .time_variants import kmajor_variants, narrow_variants, vec_variants

VARIANTS = {("float32", n): v for n, v in kmajor_variants().items()}
VARIANTS.update({("float64", n): v for n, v in vec_variants().items()})
# 128x64x32 on 16-byte fragments: plain, double-buffered within the k-tile, BK 16
VARIANTS.update({("float64", n): v for n, v in narrow_variants().items()
                 if n in ("dvec128x64w4x2b32", "dvec128x64w4x2b32db", "dvec128x64w4x2b16s4")})
LAYOUTS = [("C", "C"), ("F", "F"), ("C", "F"), ("F", "C")]
FIXES = [("data_parallel", "deterministic"), ("stream_k", "deterministic"),
         ("stream_k", "atomic"), ("stream_k", "arrival"), ("aligned", "deterministic")]
SHAPES = [  # (batch, m, n, k)
    (1, 1, 300, 40),       # M = 1
    (1, 300, 1, 72),       # N = 1
    (1, 128, 128, 16),     # one tile, one k-tile
    (1, 64, 64, 8),        # K < BK
    (1, 100, 70, 20),      # K < BK = 32, > BK = 16; ragged M, N
    (1, 200, 136, 100),    # K not a multiple of BK (fp64: the last k8 step half zero-filled)
    (1, 257, 383, 3003),   # ragged M, N, K; Stream-K splits
    (3, 130, 70, 900),     # batched
]


@pytest.fixture
def forced(monkeypatch):
    """Force one spec as the only base of its dtype (plans are cached without the spec)."""
    from skcontract.kernels import gemm as G
    from skcontract.kernels import specs

    def force(dtype, spec):
        monkeypatch.setitem(specs.HEURISTIC_TILES, dtype, (spec,))
        G.clear_plans()
    yield force
    G.clear_plans()


def _gemm_checked(spec, dtype, a, b, out, mode, reduction):
    import cupy
    from skcontract.kernels import gemm as G
    G.gemm(a, b, out, mode=mode, reduction=reduction)
    ran = list(G._PLANS.values())[-1].kernel.spec
    assert (ran.ffma, ran.frag, ran.bm, ran.bn, ran.bk, ran.stages, ran.warps,
            ran.min_blocks) == (spec.ffma, spec.frag, spec.bm, spec.bn, spec.bk, spec.stages,
                                spec.warps, spec.min_blocks), ran.name
    err = rel_error(out, cupy.matmul(to64(a), to64(b)))
    assert err <= TOL[dtype], (ran.name, a.shape, b.shape, mode, reduction, err)


@pytest.mark.parametrize("key", sorted(VARIANTS))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_variant_layouts_fixups(key, layout, forced):
    dtype, spec = key[0], VARIANTS[key]
    forced(dtype, spec)
    for mode, reduction in FIXES:
        for batch, m, n, k in SHAPES:
            a = rand((batch, m, k) if batch > 1 else (m, k), dtype, layout[0], k)
            b = rand((batch, k, n) if batch > 1 else (k, n), dtype, layout[1], k + 1)
            out = poisoned((batch, m, n) if batch > 1 else (m, n), a)
            _gemm_checked(spec, dtype, a, b, out, mode, reduction)


@pytest.mark.parametrize("key", sorted(VARIANTS))
def test_variant_misaligned(key, forced):
    """Odd leading dimensions / offsets: the element-wise (VEC = 1) loader fills the stages."""
    dtype, spec = key[0], VARIANTS[key]
    forced(dtype, spec)
    m, n, k = 191, 170, 531  # odd m, n + 5, k + 3 and offsets: no operand 16-byte aligned
    for order in ("C", "F"):
        a = rand((m, k + 3), dtype, order, 3)[:, 1:k + 1]
        b = rand((k + 1, n + 5), dtype, order, 4)[1:, 2:n + 2]
        _gemm_checked(spec, dtype, a, b, poisoned((m, n), a), "stream_k", "deterministic")
