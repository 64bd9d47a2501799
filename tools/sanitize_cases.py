"""A few small GEMMs, memory-bound products (the Dot kernel) and convolutions (the im2col
kernels) per fixup protocol, for compute-sanitizer (memcheck / racecheck).

Run from the repository root (the cases reuse the GPU tests' helpers):

    compute-sanitizer --tool memcheck python -m tools.sanitize_cases [SHAPE]

``SHAPE`` (e.g. ``4224x1096x2048``; a comma list) runs only the GEMM cases of those shapes;
``SHAPE`` may also be a dtype of the cases (``3xtf32``, ``tf32``, ``int8``, ...), which runs
those, or ``dot`` / ``conv`` / ``complex`` / ``direct``, the Dot kernel's, the
convolutions', the complex products' or the kernels' without a split table (outer, small
batched, depthwise). racecheck takes about 10 s a case, so ``tools/device_run.sh race``
runs the list in such groups.
"""
from __future__ import annotations

import sys

import numpy as np

from skcontract import conv2d
from skcontract.kernels.dot import matvec
from skcontract.kernels.forms import form_of
from skcontract.kernels.gemm import device_info, gemm
from skcontract.kernels.resolve import resolve_dot
from skcontract.ops.conv2d import conv_geometry
from tests.conv_reference import direct
from tests.gpu.helpers import TOL, poisoned, rand, rel_error, to64

DOT_CASES = [  # dtype, x shape, y shape, (x order, y order), mode, reduction
    ("float32", (1, 300000), (300000, 1), ("C", "C"), "stream_k", "arrival"),      # last arrival
    ("float16", (1, 4000000), (4000000, 1), ("C", "C"), "stream_k", "arrival"),    # > 256 peers
    ("float16", (1, 300000), (300000, 1), ("C", "C"), "stream_k", "deterministic"),
    ("float64", (1, 100000), (100000, 1), ("C", "C"), "stream_k", "atomic"),
    ("float32", (777, 1001), (1001, 1), ("C", "C"), "stream_k", "deterministic"),  # rows
    ("float16", (1, 5000), (5000, 700), ("C", "C"), "stream_k", "arrival"),        # cols
    ("float32", (1, 5001), (5001, 333), ("C", "C"), "data_parallel", "deterministic"),
    ("float64", (300, 2000), (2000, 1), ("F", "C"), "stream_k", "deterministic"),  # cols
    ("float32", (1, 9000), (9000, 300), ("C", "C"), "split_k", "atomic"),          # cols
]


def dot_cases() -> int:
    """The Dot kernel's shapes and protocols; returns the number of failures."""
    import cupy

    bad = 0
    for dtype, xs, ys, (xo, yo), mode, red in DOT_CASES:
        x, y = rand(xs, dtype, xo, 3), rand(ys, dtype, yo, 4)
        form, _ = form_of(x, y)
        resolved = resolve_dot(form, dtype, device_info(0), mode=mode, reduction=red)
        out = matvec(x, y, resolved, out=poisoned((xs[0], ys[1]), x))
        err = rel_error(out, cupy.matmul(to64(x), to64(y)))
        ok = err <= TOL[dtype]
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} dot {dtype} {xs}x{ys} {form.shape} {mode} {red} "
              f"err={err:.2e}", flush=True)
    return bad


COMPLEX_CASES = [  # dtype, x shape, y shape, (x order, y order), precision
    ("complex64", (130, 70), (70, 90), ("C", "C"), None),        # B embedded, 3xTF32
    ("complex64", (130, 71), (71, 90), ("F", "F"), "exact"),     # A embedded (C^T), FFMA
    ("complex64", (4, 33, 40), (4, 40, 20), ("F", "C"), None),   # A copied row-major
    ("complex128", (70, 90), (90, 50), ("C", "C"), None),        # DMMA
    ("complex64", (1, 300000), (300000, 1), ("C", "C"), None),   # Dot: one dot, arrival
    ("complex128", (777, 1001), (1001, 1), ("C", "C"), None),    # Dot rows, 16-byte elements
    ("complex64", (1, 5000), (5000, 700), ("C", "C"), None),     # Dot cols
]


def complex_cases() -> int:
    """Complex products on their real form (the embedding kernel, then a real product) and
    memory-bound ones on the Dot kernel; returns the number of failures."""
    import cupy

    from skcontract import einsum
    bad = 0
    for dtype, xs, ys, (xo, yo), precision in COMPLEX_CASES:
        real = "float32" if dtype == "complex64" else "float64"
        x = rand(xs, real, "C", 5) + 1j * rand(xs, real, "C", 6)
        y = rand(ys, real, "C", 7) + 1j * rand(ys, real, "C", 8)
        x, y = (cupy.ascontiguousarray(v.swapaxes(-1, -2)).swapaxes(-1, -2) if o == "F"
                else v for v, o in ((x, xo), (y, yo)))
        ref = cupy.matmul(x.astype(cupy.complex128), y.astype(cupy.complex128))
        got = einsum("...ij,...jk->...ik", x.astype(dtype), y.astype(dtype),
                     precision=precision)
        err = float(cupy.linalg.norm(got - ref) / cupy.linalg.norm(ref))
        ok = err <= TOL[real]
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} complex {dtype} {xs}x{ys} {xo}{yo} {precision} "
              f"err={err:.2e}", flush=True)
    return bad


def direct_cases() -> int:
    """The kernels with no split table: outer products, small batched products, depthwise
    convolutions (both layouts, a bias); returns the number of failures."""
    import cupy

    from skcontract import einsum
    bad = 0
    runs = []
    x, y = rand((300,), "float32", "C", 1), rand((1000,), "float32", "C", 2)
    runs.append(("outer float32 300x1000", einsum("i,j->ij", x, y),
                 cupy.outer(to64(x), to64(y)), TOL["float32"]))
    a, b = rand((3000, 5, 7), "float16", "C", 3), rand((3000, 7, 3), "float16", "C", 4)
    runs.append(("small float16 3000x5x3x7", einsum("bij,bjk->bik", a, b),
                 cupy.matmul(to64(a), to64(b)), TOL["float16"]))
    for layout in ("NCHW", "NHWC"):
        xs = rand((2, 32, 13, 11), "float32", "C", 5)
        if layout == "NHWC":
            xs = cupy.ascontiguousarray(xs.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        ws, bs = rand((32, 1, 3, 3), "float32", "C", 6), rand((32,), "float32", "C", 7)
        ref = direct(cupy.asnumpy(xs), cupy.asnumpy(ws), cupy.asnumpy(bs), (2, 2),
                     (1, 1, 1, 1), (1, 1), 32)
        runs.append((f"depthwise float32 {layout}", conv2d(xs, ws, bs, 2, 1, 1, 32),
                     cupy.asarray(ref), TOL["float32"]))
    # the square kernel over two channel slices (36 vectors), and in float16 at 7 x 7; the
    # vector kernel for any filter (dilated)
    for dtype, channels, size, dilation, seed in (("float32", 144, 5, 1, 8),
                                                  ("float16", 96, 7, 1, 10),
                                                  ("float16", 64, 3, 2, 12)):
        xs = rand((2, 13, 11, channels), dtype, "C", seed).transpose(0, 3, 1, 2)
        ws = rand((channels, 1, size, size), dtype, "C", seed + 1)
        pad = dilation * (size // 2)
        ref = direct(cupy.asnumpy(xs), cupy.asnumpy(ws), None, (1, 1), (pad,) * 4,
                     (dilation, dilation), channels)
        runs.append((f"depthwise {dtype} NHWC {size}x{size} dilation {dilation}, "
                     f"{channels} channels", conv2d(xs, ws, None, 1, pad, dilation, channels),
                     cupy.asarray(ref), TOL[dtype]))
    for name, got, ref, tol in runs:
        err = rel_error(got, ref)
        ok = err <= tol
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name} err={err:.2e}", flush=True)
    return bad


CONV_CASES = [  # dtype, (N, C, H, W), (K, R, S), stride, padding, groups, layout, mode, reduction
    ("float16", (1, 64, 7, 7), (64, 3, 3), 1, 1, 1, "NHWC", "stream_k", "deterministic"),
    ("float16", (1, 64, 7, 7), (64, 3, 3), 1, 1, 1, "NHWC", "stream_k", "arrival"),
    ("float16", (1, 64, 7, 7), (64, 3, 3), 1, 1, 1, "NHWC", "aligned", "cluster"),
    ("float32", (2, 5, 9, 8), (6, 3, 2), 2, 1, 1, "NCHW", "stream_k", "atomic"),  # element copies
    ("float64", (2, 8, 9, 9), (12, 3, 3), 1, "same", 4, "NCHW", "data_parallel", "deterministic"),
    ("float32", (1, 32, 5, 5), (8, 3, 3), 1, 1, 1, "NHWC", "split_k", "deterministic"),
    # 16 channels a group: the narrow 128 x 32 convolution tile
    ("float16", (4, 512, 14, 14), (512, 3, 3), 1, 1, 32, "NHWC", "auto", "deterministic"),
    # a stem: on sm_90 its filter rows' taps folded into channels (overlapping TMA view)
    ("float16", (2, 3, 30, 27), (16, 7, 7), 2, 3, 1, "NCHW", "stream_k", "arrival"),
]


def conv_cases() -> int:
    """The im2col kernels: padding taps, groups, element copies, each fixup; failures."""
    import cupy

    bad = 0
    for dtype, xs, (k, r, s), stride, pad, groups, layout, mode, red in CONV_CASES:
        rng = np.random.default_rng(5)
        x = rng.standard_normal(xs)
        w = rng.standard_normal((k, xs[1] // groups, r, s))
        g = conv_geometry(xs, w.shape, stride, pad, 1, groups)
        want = direct(x, w, None, g.stride, g.padding, g.dilation, groups)
        xd = cupy.asarray(x.astype(dtype))
        if layout == "NHWC":
            xd = cupy.ascontiguousarray(xd.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        got = conv2d(xd, cupy.asarray(w.astype(dtype)), None, stride, pad, 1, groups,
                     mode=mode, reduction=red)
        err = float(np.abs(cupy.asnumpy(got).astype(np.float64) - want).max()
                    / max(np.abs(want).max(), 1.0))
        ok = err <= 2 * TOL[dtype]
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} conv2d {dtype} {xs} {k}x{r}x{s} groups={groups} "
              f"{layout} {mode} {red} err={err:.2e}", flush=True)
    return bad


def main(argv=None) -> int:
    import cupy

    argv = sys.argv[1:] if argv is None else argv
    only = set(argv[0].split(",")) if argv else None
    cases = [  # dtype, (m, n, k), mode, reduction[, tile[, (A order, B order)]]
        # the portable 16-bit mainloop (mma.sync), forced: auto picks Wgmma on sm_90
        ("float16", (200, 136, 2000), "data_parallel", "deterministic", (128, 128, 32)),
        ("float16", (200, 136, 2000), "stream_k", "deterministic", (128, 128, 32)),
        ("float16", (200, 136, 2000), "stream_k", "atomic", (128, 128, 32)),
        ("float16", (200, 136, 2000), "aligned", "deterministic", (128, 128, 32)),
        # the Wgmma family (sm_90a): TMA ring, consumer-only fixups, both tiles and layouts
        ("float16", (200, 136, 2000), "stream_k", "deterministic", (128, 128, 64)),
        ("float16", (200, 136, 2000), "stream_k", "atomic", (128, 256, 64), ("C", "C")),
        ("float16", (256, 256, 8192), "stream_k", "arrival", (128, 128, 64), ("F", "C")),
        ("float16", (136, 264, 72), "data_parallel", "deterministic", (128, 256, 64), ("F", "F")),
        # HyTiS: the 128 x 256 kernel's small rows (half of B, half the columns stored)
        ("float16", (2200, 2312, 200), "hytis", "deterministic", (128, 256, 64), ("C", "C")),
        ("float16", (1000, 136, 264), "hytis", "deterministic", (128, 256, 64), ("C", "F")),
        # a shared sum in groups of peers, its scratch in the idle ring
        ("float16", (64, 128, 16384), "stream_k", "arrival", (64, 128, 64), ("C", "C")),
        # the paired 128 x 64 (two CTAs an SM, registers traded): split tiles whose fixups
        # wait at 264 CTAs
        ("float16", (4224, 1096, 2048), "stream_k", "deterministic", (128, 64, 64)),
        ("float16", (4224, 1096, 2048), "hybrid", "arrival", (128, 64, 64), ("F", "C")),
        ("float16", (4224, 1096, 2048), "stream_k", "atomic", (128, 64, 64)),
        # cluster pairs (B multicast into both CTAs, remote releases of its stages)
        ("float16", (1056, 1056, 4096), "stream_k", "deterministic", (256, 128, 64)),
        ("float16", (1056, 1056, 4096), "stream_k", "arrival", (256, 256, 64), ("F", "C")),
        ("float16", (1056, 1056, 4096), "stream_k", "atomic", (256, 128, 64), ("C", "C")),
        # narrow pairs: a K-major B's box split along its rows, an N-major B's along k
        ("float16", (1000, 1000, 1000), "stream_k", "deterministic", (128, 64, 64, 1, 2)),
        ("float16", (1000, 1000, 1000), "stream_k", "arrival", (256, 64, 64, 1, 2),
         ("C", "C")),
        ("float16", (1000, 1000, 1000), "stream_k", "atomic", (128, 64, 64, 1, 2),
         ("F", "C")),
        # the cluster protocol: a tile's splits summed in one cluster's shared memory
        ("float16", (128, 128, 16384), "aligned", "cluster", (64, 64, 64)),
        ("float16", (136, 264, 4032), "aligned", "cluster", (128, 64, 64), ("F", "C")),
        ("float32", (130, 70, 1000), "stream_k", "deterministic"),
        ("float64", (70, 90, 1000), "stream_k", "atomic"),
        ("float32", (130, 70, 3000), "stream_k", "arrival"),   # shared sum
        ("float64", (70, 90, 3000), "stream_k", "arrival"),
        # interior k-tiles; the edge tiles' windows shifted back inside (k-contiguous A, B)
        ("float64", (300, 200, 1000), "stream_k", "deterministic", (128, 64, 32)),
        # the fp32 64-column and 64-row tiles
        ("float32", (520, 136, 1000), "stream_k", "deterministic", (256, 64, 32)),
        ("float32", (136, 520, 1000), "stream_k", "arrival", (64, 256, 32), ("F", "C")),
        # the same through x-contiguous operands (shifted by whole 16-byte chunks)
        ("float64", (300, 202, 1000), "stream_k", "deterministic", (128, 64, 32), ("F", "C")),
        ("float64", (300, 200, 1000), "stream_k", "deterministic", (128, 64, 16)),  # 2 CTAs/SM
        ("float32", (1, 8192, 2048), "stream_k", "arrival", (1, 1024, 8)),  # one-row GEMV
        ("float64", (1, 1024, 3000), "stream_k", "deterministic", (1, 512, 8)),
        ("float32", (6, 2048, 3000), "stream_k", "deterministic", (8, 256, 16)),  # 2 CTAs/SM
        ("float64", (100, 300, 2000), "stream_k", "atomic", (64, 64, 16)),  # 2 CTAs/SM
        # tf32: on wgmma (K-major operands; a row-major B copied first), a shared sum and the
        # cluster protocol; on mma.sync where rows of K floats miss 16 bytes
        ("tf32", (130, 70, 1000), "stream_k", "deterministic"),
        ("tf32", (300, 200, 1000), "stream_k", "atomic", (64, 256, 32), ("C", "C")),
        ("tf32", (256, 256, 8192), "stream_k", "arrival", (128, 128, 32)),
        ("tf32", (136, 264, 4032), "aligned", "cluster", (128, 64, 32)),
        ("tf32", (130, 70, 1001), "stream_k", "deterministic"),
        # the register-trading tf32 entry (no arrival protocol)
        ("tf32", (2304, 2304, 520), "stream_k", "deterministic", (128, 256, 32)),
        # 3xTF32: the splitter warps' pass, three wgmmas a k step, promotions, each fixup;
        # MN-major operands turned K-major in the stages by the producer's other warps
        ("3xtf32", (300, 200, 1000), "stream_k", "deterministic"),
        ("3xtf32", (300, 200, 1000), "stream_k", "atomic", (128, 128, 32), ("C", "C")),
        ("3xtf32", (256, 256, 8192), "stream_k", "arrival", (128, 64, 32)),
        ("3xtf32", (256, 256, 8192), "stream_k", "arrival", (128, 64, 32), ("F", "C")),
        ("3xtf32", (300, 200, 1000), "stream_k", "deterministic", (64, 64, 32), ("F", "F")),
        ("3xtf32", (136, 264, 4032), "aligned", "cluster", (64, 64, 32)),
        ("3xtf32", (136, 264, 4032), "aligned", "cluster", (64, 64, 32), ("C", "C")),
        ("3xtf32", (2304, 2304, 520), "stream_k", "deterministic", (128, 128, 32)),
        # int8: on s8 wgmma (B column-major), a shared sum, and on mma.sync (rows of K bytes
        # off 16)
        ("int8", (200, 136, 2000), "stream_k", "deterministic"),
        ("int8", (256, 256, 8192), "stream_k", "arrival", (128, 128, 128)),
        ("int8", (200, 136, 2001), "stream_k", "atomic"),
    ]
    bad = 0
    for dtype, (m, n, k), mode, red, *rest in cases:
        if only is not None and f"{m}x{n}x{k}" not in only and dtype not in only:
            continue
        tile = rest[0] if rest else None
        a_order, b_order = rest[1] if len(rest) > 1 else ("C", "F")
        if dtype == "int8":
            rs = cupy.random.RandomState(1)
            a = rs.randint(-128, 128, size=(m, k)).astype(cupy.int8)
            b = cupy.asfortranarray(rs.randint(-128, 128, size=(k, n)).astype(cupy.int8))
            out = cupy.full((m, n), -559038737, cupy.int32)
            gemm(a, b, out, mode=mode, reduction=red)
            want = np.matmul(cupy.asnumpy(a).astype(np.int64), cupy.asnumpy(b).astype(np.int64))
            err = float(np.count_nonzero(cupy.asnumpy(out).astype(np.int64) != want))
            ok = err == 0
        else:
            precision = dtype if dtype in ("tf32", "3xtf32") else None
            dt = "float32" if precision else dtype
            a, b = rand((m, k), dt, a_order, 1), rand((k, n), dt, b_order, 2)
            out = poisoned((m, n), a)
            gemm(a, b, out, mode=mode, reduction=red, precision=precision, tile=tile)
            err = rel_error(out, cupy.matmul(to64(a), to64(b)))
            ok = err <= (5e-3 if precision == "tf32" else TOL[dt])
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {dtype} {m}x{n}x{k} {mode} {red} err={err:.2e}",
              flush=True)
    if only is None or "dot" in only:
        bad += dot_cases()
    if only is None or "conv" in only:
        bad += conv_cases()
    if only is None or "complex" in only:
        bad += complex_cases()
    if only is None or "direct" in only:
        bad += direct_cases()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
