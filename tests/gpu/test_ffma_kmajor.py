"""GPU correctness of the k-major fp32 FFMA mainloop (``KernelSpec.ffma="kmajor"``,
MainloopFfmaKMajor).

Each variant of ``time_variants.kmajor_variants()`` is forced as the only float32 base and run
on every A/B layout (k-contiguous operands go through the shared-memory transpose,
x-contiguous ones are read from the stages), ragged shapes (M, N not multiples of 128, K not
a multiple of BK, K < BK), a batch and misaligned leading dimensions, data-parallel and
Stream-K (deterministic and aligned fixups), against a float64 reference with NaN-poisoned
outputs.
"""
from __future__ import annotations

import pytest

from .helpers import TOL, poisoned, rand, rel_error, to64
from .time_variants import kmajor_variants

VARIANTS = kmajor_variants()
LAYOUTS = [("C", "C"), ("F", "F"), ("C", "F"), ("F", "C")]
FIXES = [("data_parallel", "deterministic"), ("stream_k", "deterministic"),
         ("aligned", "deterministic")]
SHAPES = [  # (batch, m, n, k)
    (1, 1, 300, 40),       # M = 1
    (1, 300, 1, 72),       # N = 1
    (1, 128, 128, 32),     # one tile
    (1, 64, 64, 8),        # K < BK (both BK = 16 and 32)
    (1, 100, 70, 20),      # K < BK = 32, > BK = 16; ragged M, N
    (1, 200, 136, 100),    # K not a multiple of BK
    (1, 257, 383, 3003),   # ragged M, N, K; Stream-K splits
    (3, 130, 70, 900),     # batched
]


@pytest.fixture
def forced(monkeypatch):
    """Force one spec as the only float32 base (plans are cached without the spec: clear)."""
    from skcontract.kernels import gemm as G
    from skcontract.kernels import specs

    def force(spec):
        monkeypatch.setitem(specs.HEURISTIC_TILES, "float32", (spec,))
        G.clear_plans()
    yield force
    G.clear_plans()


def _assert_ran(spec):
    from skcontract.kernels import gemm as G
    ran = list(G._PLANS.values())[-1].kernel.spec
    assert ran.ffma == "kmajor" and (ran.bm, ran.bn, ran.bk, ran.stages, ran.min_blocks) == (
        spec.bm, spec.bn, spec.bk, spec.stages, spec.min_blocks), ran.name
    return ran


def _check(spec, batch, m, n, k, layout, mode, reduction, seed=0):
    import cupy
    from skcontract.kernels import gemm as G
    a = rand((batch, m, k) if batch > 1 else (m, k), "float32", layout[0], seed)
    b = rand((batch, k, n) if batch > 1 else (k, n), "float32", layout[1], seed + 1)
    out = poisoned((batch, m, n) if batch > 1 else (m, n), a)
    G.gemm(a, b, out, mode=mode, reduction=reduction)
    ran = _assert_ran(spec)
    err = rel_error(out, cupy.matmul(to64(a), to64(b)))
    assert err <= TOL["float32"], (ran.name, batch, m, n, k, mode, reduction, err)


@pytest.mark.parametrize("name", sorted(VARIANTS))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_kmajor_layouts_modes(name, layout, forced):
    spec = VARIANTS[name]
    forced(spec)
    for mode, reduction in FIXES:
        for batch, m, n, k in SHAPES:
            _check(spec, batch, m, n, k, layout, mode, reduction)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_kmajor_misaligned(name, forced):
    """Odd leading dimensions / offsets: the element-wise (VEC = 1) loader fills the stages
    the transpose and the fragment loads read."""
    import cupy
    from skcontract.kernels import gemm as G
    forced(VARIANTS[name])
    m, n, k = 191, 170, 531  # odd m, n + 5, k + 3 and offsets: no operand 16-byte aligned
    for order in ("C", "F"):
        a = rand((m, k + 3), "float32", order, 3)[:, 1:k + 1]
        b = rand((k + 1, n + 5), "float32", order, 4)[1:, 2:n + 2]
        out = poisoned((m, n), a)
        G.gemm(a, b, out, mode="stream_k")
        _assert_ran(VARIANTS[name])
        assert rel_error(out, cupy.matmul(to64(a), to64(b))) <= TOL["float32"], (name, order)
