"""GPU correctness of the fp64 ``frag="vec"`` / ``"vecdb"`` mainloop (MainloopDmmaVec).

Each variant of ``time_variants.vec_variants()`` is forced as the only float64 base and run on
every A/B layout (A row-major with B row-major is the transposed orientation), every fixup
protocol, ragged K (not a multiple of BK nor of 8), edge shapes, a batch and misaligned
leading dimensions, against a float64 reference with NaN-poisoned outputs.
"""
from __future__ import annotations

import pytest

from .helpers import TOL, poisoned, rand, rel_error, to64
from .time_variants import vec_variants

VARIANTS = vec_variants()
LAYOUTS = [("C", "C"), ("F", "F"), ("C", "F"), ("F", "C")]
FIXES = [("data_parallel", "deterministic"), ("stream_k", "deterministic"),
         ("stream_k", "atomic"), ("aligned", "deterministic")]
SHAPES = [  # (batch, m, n, k)
    (1, 1, 300, 40),       # M = 1
    (1, 300, 1, 72),       # N = 1
    (1, 128, 128, 16),     # one tile, one k-tile
    (1, 200, 136, 100),    # K % 16 = 4: the last k8 step half zero-filled
    (1, 257, 383, 3003),   # ragged M, N, K; Stream-K splits
    (3, 130, 70, 900),     # batched
]


@pytest.fixture
def forced(monkeypatch):
    """Force one spec as the only float64 base (plans are cached without the spec: clear)."""
    from skcontract.kernels import gemm as G
    from skcontract.kernels import specs

    def force(spec):
        monkeypatch.setitem(specs.HEURISTIC_TILES, "float64", (spec,))
        G.clear_plans()
    yield force
    G.clear_plans()


def _check(spec, batch, m, n, k, layout, mode, reduction, seed=0):
    import cupy
    from skcontract.kernels import gemm as G
    a = rand((batch, m, k) if batch > 1 else (m, k), "float64", layout[0], seed)
    b = rand((batch, k, n) if batch > 1 else (k, n), "float64", layout[1], seed + 1)
    out = poisoned((batch, m, n) if batch > 1 else (m, n), a)
    G.gemm(a, b, out, mode=mode, reduction=reduction)
    ran = list(G._PLANS.values())[-1].kernel.spec
    assert ran.frag == spec.frag and (ran.bm, ran.bn, ran.bk, ran.warps) == (
        spec.bm, spec.bn, spec.bk, spec.warps), ran.name
    err = rel_error(out, cupy.matmul(to64(a), to64(b)))
    assert err <= TOL["float64"], (ran.name, batch, m, n, k, mode, reduction, err)


@pytest.mark.parametrize("name", sorted(VARIANTS))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_vec_variant_layouts_fixups(name, layout, forced):
    spec = VARIANTS[name]
    forced(spec)
    for mode, reduction in FIXES:
        for batch, m, n, k in SHAPES:
            _check(spec, batch, m, n, k, layout, mode, reduction)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_vec_variant_misaligned(name, forced):
    """Odd leading dimensions / offsets (A and B misaligned in both orders) take the
    element-wise (VEC = 1) loader into the padded stages."""
    import cupy
    from skcontract.kernels import gemm as G
    forced(VARIANTS[name])
    m, n, k = 191, 170, 531  # odd m, n + 5, k + 3 and offsets: no operand 16-byte aligned
    for order in ("C", "F"):
        a = rand((m, k + 3), "float64", order, 3)[:, 1:k + 1]
        b = rand((k + 1, n + 5), "float64", order, 4)[1:, 2:n + 2]
        out = poisoned((m, n), a)
        G.gemm(a, b, out, mode="stream_k")
        assert rel_error(out, cupy.matmul(to64(a), to64(b))) <= TOL["float64"], order
