"""A few small GEMMs per fixup protocol, for compute-sanitizer (memcheck / racecheck).

Run: compute-sanitizer --tool memcheck python -m tests.gpu.sanitize_cases
"""
from __future__ import annotations

import sys

from tests.gpu.helpers import TOL, poisoned, rand, rel_error, to64


def main() -> int:
    import cupy

    from skcontract.kernels.gemm import gemm
    cases = [  # dtype, (m, n, k), mode, reduction
        ("float16", (200, 136, 2000), "data_parallel", "deterministic"),
        ("float16", (200, 136, 2000), "stream_k", "deterministic"),
        ("float16", (200, 136, 2000), "stream_k", "atomic"),
        ("float16", (200, 136, 2000), "aligned", "deterministic"),
        ("float32", (130, 70, 1000), "stream_k", "deterministic"),
        ("float64", (70, 90, 1000), "stream_k", "atomic"),
    ]
    bad = 0
    for dtype, (m, n, k), mode, red in cases:
        a, b = rand((m, k), dtype, "C", 1), rand((k, n), dtype, "F", 2)
        out = poisoned((m, n), a)
        gemm(a, b, out, mode=mode, reduction=red)
        err = rel_error(out, cupy.matmul(to64(a), to64(b)))
        ok = err <= TOL[dtype]
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {dtype} {m}x{n}x{k} {mode} {red} err={err:.2e}",
              flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
