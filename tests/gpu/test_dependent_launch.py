"""Launches that overlap: on sm_90 and later every family's kernels launch with programmatic
stream serialization (each may start while the kernel before it runs, reads its first
split-table row and waits for it before any other global access). Chains of launches across the
portable families and the Dot family, with no synchronisation between them, must read what
the previous kernel wrote and write only after the previous kernel has read. The Wgmma
family's chains are in test_wgmma.py."""
from __future__ import annotations

import pytest

from .helpers import TOL, launch_chain, poisoned, rand, rel_error, to64

cupy = pytest.importorskip("cupy")

pytestmark = pytest.mark.skipif(
    int(cupy.cuda.Device().compute_capability) < 90,
    reason="programmatic dependent launch needs sm_90")

# (gemm mode, reduction) of the two readers: the deterministic fixup signals the next grid
# only at its exit, the others as they start
READERS = [("stream_k", "deterministic"), ("stream_k", "arrival"),
           ("data_parallel", "deterministic"), ("split_k", "atomic")]


def _gemm(*args, **kwargs):
    from skcontract.kernels.gemm import gemm
    return gemm(*args, **kwargs)


def _matvec(*args, **kwargs):
    from skcontract.kernels.dot import matvec
    return matvec(*args, **kwargs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode,reduction", READERS, ids=lambda v: str(v))
def test_portable_and_dot_launches_wait_for_each_other(dtype, mode, reduction):
    """A long GEMM writes P, a Dot product reads it (read after write); a long GEMM reads
    Q, and a Dot product then overwrites Q (write after read). Plans are made first (a plan's
    first call synchronises), then the four launch back to back."""
    a, b = rand((512, 4096), dtype, "C", 21), rand((4096, 512), dtype, "C", 22)
    v = rand((512, 1), dtype, "C", 23)
    q, d = rand((256, 16384), dtype, "C", 24), rand((16384, 256), dtype, "C", 25)
    x, y = rand((1, 8), dtype, "C", 26), rand((8, q.size), dtype, "C", 27)
    p, pv, qd = poisoned((512, 512), a), poisoned((512, 1), a), poisoned((256, 256), a)
    q_flat = q.reshape(1, q.size)
    steps = [lambda: _gemm(a, b, p, mode="stream_k", reduction="arrival"),   # writes P
             lambda: _matvec(p, v, out=pv),                                 # reads P
             lambda: _gemm(q, d, qd, mode=mode, reduction=reduction),       # reads Q
             lambda: _matvec(x, y, out=q_flat)]                             # writes Q
    q_before = to64(q)
    launched = launch_chain(steps, lambda: _matvec(x, y, out=poisoned(q_flat.shape, a)),
                            (p, pv, qd))
    assert [r.kernel.startswith("dot_") for r in launched] == [False, True, False, True]
    assert all(r.programmatic for r in launched), launched
    assert rel_error(pv, cupy.matmul(to64(p), to64(v))) <= TOL[dtype]
    assert rel_error(qd, cupy.matmul(q_before, to64(d))) <= TOL[dtype]
    assert rel_error(q_flat, cupy.matmul(to64(x), to64(y))) <= TOL[dtype]
