"""Time kernel variants against cuBLAS in one run (not a pytest module).

    python -m tests.gpu.time_variants [--dtypes float32,float64] [--variants]

For each shape: cuBLAS (torch.matmul, CUDA-graph replay), ``gemm`` auto (tile chosen by the
scheduler over HEURISTIC_TILES), and with ``--variants`` each candidate base forced alone.
Prints one table: us and ratio cuBLAS / ours (>= 1: we are as fast), plus relative error.
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace

SHAPES = [(1024, 1024, 1024), (2304, 2304, 4096), (128, 128, 16384), (1, 8192, 8192),
          (1000, 1000, 1000)]


def variants(dtype):
    from skcontract.kernels import specs
    K = specs.KernelSpec
    if dtype == "float32":
        b = K("float32", "float32", "float32", 128, 128, 16, 3, 2, 4, "ffma", a_vec=4, b_vec=4)
        g = K("float32", "float32", "float32", 8, 256, 16, 4, 2, 4, "ffma", a_vec=4, b_vec=4)
        return {"f128s3": b, "f128mb2": replace(b, min_blocks=2), "f128s4": replace(b, stages=4),
                "f128k32": replace(b, bk=32), "f128k32s4": replace(b, bk=32, stages=4),
                "f8x256": g, "f128k32mb2": replace(b, bk=32, min_blocks=2), "f8x256k32": replace(g, bk=32), "f8x256s8": replace(g, stages=8),
                **kmajor_variants(), **gemv_variants("float32"),
                "f256x128k16": replace(b, bm=256, bk=16), "f256x128k8s4": replace(b, bm=256, bk=8, stages=4),
                "f128x256k16": replace(b, bn=256, bk=16)}
    if dtype == "float64":
        d = K("float64", "float64", "float64", 128, 64, 16, 4, 4, 2, "mma_sync", a_vec=2, b_vec=2)
        q = K("float64", "float64", "float64", 128, 128, 16, 3, 2, 4, "mma_sync", a_vec=2,
              b_vec=2)
        return {"d128x64": d, "d128x64k4": replace(d, mma_k=4), "d128x64k8": replace(d, mma_k=8),
                "d128x64k16": replace(d, mma_k=16), "d128x128k8": replace(q, mma_k=8),
                "d128x128k16": replace(q, mma_k=16),
                "d128x128k8b32": replace(q, mma_k=8, bk=32),
                "d128x128w16k8": replace(q, warps_m=4, mma_k=8),
                "d128x128w16k8b32": replace(q, warps_m=4, mma_k=8, bk=32),
                "d128x128w16k16": replace(q, warps_m=4, mma_k=16),
                "d128x128k8s4": replace(q, mma_k=8, stages=4),
                "d128x128k16b32": replace(q, mma_k=16, bk=32),
                "d64x64k16": K("float64", "float64", "float64", 64, 64, 16, 3, 2, 2, "mma_sync",
                               a_vec=2, b_vec=2, mma_k=16),
                "d128x64k16s3": replace(d, mma_k=16, stages=3),
                "dffma8x256": K("float64", "float64", "float64", 8, 256, 16, 4, 2, 4, "ffma",
                                a_vec=2, b_vec=2),
                **vec_variants(), **gemv_variants("float64"), **narrow_variants()}
    return {}


def narrow_variants():
    """fp64 128x64 tiles as cuBLAS runs them on the H200 (ncu, 2026-11-30): 4 warps of 64x32
    with two CTAs per SM ("w2x2 ... mb2", cuBLAS' 2304^2 x 4096 kernel), or 8 warps of 32x32
    with BK 32 ("w4x2b32", its 1024^3 kernel); scalar or 16-byte ("vec") fragments."""
    from skcontract.kernels import specs
    n = specs.KernelSpec("float64", "float64", "float64", 128, 64, 16, 3, 2, 2, "mma_sync",
                         a_vec=2, b_vec=2, mma_k=8, min_blocks=2)
    w8 = replace(n, bk=32, warps_m=4, min_blocks=1)
    return {"d128x64w2x2k8mb2": n, "d128x64w2x2k16mb2": replace(n, mma_k=16),
            "dvec128x64w2x2mb2": replace(n, frag="vec"),
            "dvec128x64w2x2mb2db": replace(n, frag="vecdb"),
            "dvec128x64w2x2b32s2mb2": replace(n, frag="vec", bk=32, stages=2),
            "d128x64w4x2k16b32": replace(w8, mma_k=16),
            "dvec128x64w4x2b32": replace(w8, frag="vec"),
            "dvec128x64w4x2b16s4": replace(w8, frag="vec", bk=16, stages=4),
            "dvec128x64w4x2b16s6": replace(w8, frag="vec", bk=16, stages=6),
            "dvec128x64w4x2b16s6db": replace(w8, frag="vecdb", bk=16, stages=6),
            "dvec128x64w4x2b64s2": replace(w8, frag="vec", bk=64, stages=2),
            "dvec128x64w4x2b32db": replace(w8, frag="vecdb")}


def gemv_variants(dtype):
    """One-row tiles for M = 1 (no padded rows): each thread owns one row x 16 bytes of
    columns, so it reads B once and the broadcast A once per 4 k (1x1024 fp32, 1x512 fp64)."""
    from skcontract.kernels import specs
    vec = 16 // specs.CXX_TYPES[dtype][1]
    bn = 256 * vec
    g = specs.KernelSpec(dtype, dtype, dtype, 1, bn, 8, 4, 1, 8, "ffma", a_vec=vec, b_vec=vec)
    p = "g" if dtype == "float32" else "dg"
    return {f"{p}1x{bn}k8s4": g, f"{p}1x{bn}k8s6": replace(g, stages=6),
            f"{p}1x{bn}k16s3": replace(g, bk=16, stages=3),
            f"{p}1x{bn}k8s3mb2": replace(g, stages=3, min_blocks=2)}


def kmajor_variants():
    """fp32 FFMA read k-major (KernelSpec.ffma "kmajor", MainloopFfmaKMajor): 128x128 with
    BK 16 / 32 ("fk128k16", "fk128k32"), 3 or 4 ("s4") stages, 1 or 2 ("mb2": 128-register
    cap) CTAs per SM. Two CTAs also need shared memory for two (<= ~113 KiB each): BK = 32
    has it with 3 stages only when both operands are x-contiguous (A col-major, B row-major)
    and with 4 stages never, hence also "fk128k32s2mb2" (2 stages, <= 104 KiB)."""
    from skcontract.kernels import specs
    base = specs.KernelSpec("float32", "float32", "float32", 128, 128, 16, 3, 2, 4, "ffma",
                            a_vec=4, b_vec=4, ffma="kmajor")
    out = {f"fk128k{bk}{'s4' if st == 4 else ''}{'mb2' if mb == 2 else ''}":
           replace(base, bk=bk, stages=st, min_blocks=mb)
           for bk in (16, 32) for st in (3, 4) for mb in (1, 2)}
    out["fk128k32s2mb2"] = replace(base, bk=32, stages=2, min_blocks=2)
    return out


def vec_variants():
    """fp64 m16n8k8 with 16-byte fragment loads (KernelSpec.frag "vec"; "vecdb" also loads the
    next k8 step's fragments before this step's mma): 16 warps of 32x32 (128 registers: no
    room for two fragment sets, so no "db") and 8 warps of 64x32 (255 registers), 128x128x16
    3 stages; b32s2: BK = 32 with 2 stages (the 8 (mod 16) pitch, 32 + 8 doubles, leaves no
    shared memory for 3)."""
    from skcontract.kernels import specs
    w16 = specs.KernelSpec("float64", "float64", "float64", 128, 128, 16, 3, 4, 4, "mma_sync",
                           a_vec=2, b_vec=2, mma_k=8, frag="vec")
    w8 = replace(w16, warps_m=2)
    return {"dvec128x128w16k8": w16, "dvec128x128w8k8": w8,
            "dvec128x128w8k8db": replace(w8, frag="vecdb"),
            "dvec128x128w8k8b32s2": replace(w8, bk=32, stages=2)}


def main(argv=None) -> int:
    import cupy
    import torch

    from skcontract.bench.gemm import _calls_for, _device_time_us, _torch_graph_us
    from skcontract.kernels import gemm as G
    from skcontract.kernels import specs

    p = argparse.ArgumentParser()
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--variants", action="store_true")
    p.add_argument("--shapes", default="")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--only", default="", help="comma list of variant names")
    p.add_argument("--modes", default="auto", help="comma list of gemm modes")
    p.add_argument("--warm", type=int, default=0, help="compile the variants first, N jobs")
    args = p.parse_args(argv)
    if args.warm and args.variants:
        from skcontract.kernels import jit
        todo = [specs.specialise(v, fixup=fx, a_layout="row", b_layout="row")
                for dt in args.dtypes.split(",") for n, v in variants(dt).items()
                if not args.only or n in args.only.split(",")
                for fx in ("none", "deterministic", "aligned")]
        bad = [x for x in jit.warm(todo, args.warm) if x.startswith("FAIL")]
        print(f"warmed {len(todo)} variant kernels, {len(bad)} failed", *bad[:3], sep="\n",
              flush=True)
    shapes = SHAPES if not args.shapes else [tuple(map(int, s.split("x")))
                                             for s in args.shapes.split(",")]
    stream = cupy.cuda.Stream(non_blocking=True)
    summary = {}
    print(f"{'dtype':8s} {'shape':18s} {'kernel':12s} {'us':>9s} {'cublas':>9s} {'ratio':>6s} "
          f"{'TF/s':>6s} {'err':>8s}  tile", flush=True)
    for dtype in args.dtypes.split(","):
        tdt = getattr(torch, dtype)
        default = specs.HEURISTIC_TILES[dtype]
        cands = {"auto": None}
        if args.variants:
            cands.update({n: v for n, v in variants(dtype).items()
                          if not args.only or n in args.only.split(",")})
        for (m, n, k) in shapes:
            gen = torch.Generator(device="cuda").manual_seed(1)
            a = torch.randn((m, k), device="cuda", generator=gen, dtype=torch.float64).to(tdt)
            b = torch.randn((k, n), device="cuda", generator=gen, dtype=torch.float64).to(tdt)
            c = torch.empty((m, n), device="cuda", dtype=tdt)
            ref = a.double() @ b.double()
            flops = 2.0 * m * n * k
            calls = _calls_for(flops)
            cub = _torch_graph_us(lambda: torch.matmul(a, b, out=c), calls, args.reps)
            cerr = float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))
            print(f"{dtype:8s} {m}x{n}x{k:<10d} {'cublas':12s} {cub:9.1f} {cub:9.1f} {1:6.2f} "
                  f"{flops / cub / 1e6:6.1f} {cerr:8.1e}", flush=True)
            for (name, spec), mode in [(c, md) for c in cands.items()
                                       for md in args.modes.split(",")]:
                if mode != "auto":
                    name = f"{name}/{mode}"
                specs.HEURISTIC_TILES[dtype] = default if spec is None else (spec,)
                G.clear_plans()
                try:
                    def fn():
                        G.gemm(a, b, c, mode=mode, reduction="deterministic")
                    us = _device_time_us(fn, stream, calls, args.reps)
                    c.fill_(float("nan"))
                    with stream:
                        fn()
                    stream.synchronize()
                    err = float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))
                    plan = next(iter(G._PLANS.values()))
                    tile = f"{plan.kernel.spec.name} occ={plan.kernel.occupancy} " \
                           f"{plan.schedule.summary()}"
                except Exception as e:  # noqa: BLE001
                    us, err, tile = float("nan"), float("nan"), f"FAILED {type(e).__name__}: {e}"
                r = cub / us if us == us else float("nan")
                summary.setdefault((dtype, name), []).append(r)
                print(f"{dtype:8s} {m}x{n}x{k:<10d} {name:12s} {us:9.1f} {cub:9.1f} {r:6.2f} "
                      f"{flops / us / 1e6:6.1f} {err:8.1e}  {tile}", flush=True)
            specs.HEURISTIC_TILES[dtype] = default
    print("\ngeomean cuBLAS/ours over the shapes:")
    for (dtype, name), rs in summary.items():
        ok = [x for x in rs if x == x and x > 0]
        g = math.exp(sum(map(math.log, ok)) / len(ok)) if ok else float("nan")
        print(f"  {dtype:8s} {name:12s} {g:6.3f}  ({' '.join(f'{x:.2f}' for x in rs)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
