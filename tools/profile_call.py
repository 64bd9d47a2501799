"""Where the host time of one warm einsum or conv2d call goes, on the GPU.

``python -m tools.profile_call [--expr ij,jk->ik] [--shapes 64x64,64x64] [--dtype float32]
[--calls 2000] [--top 25]``
``python -m tools.profile_call --conv 1x512x7x7x512x3x3x1x1 [--dtype float16] [--nchw]``
``python -m tools.profile_call --gemm cupy|torch [--shapes 256x768,768x768] [--dtype float16]``
``python -m tools.profile_call --network circuit --limit 1GiB [--plans FILE] [--calls 3]``

Times ``skcontract.einsum`` and a ``contract_expression`` per call (plans cached), then
profiles the expression's calls with cProfile and prints the functions with the most own
time. ``--conv N x C x H x W x K x R x S x stride x padding`` does the same for conv2d on
torch tensors (channels-last unless ``--nchw``) against torch's own call. ``--network``
profiles calls of one slice and of two of the ``hyper`` plan a ``bench networks`` plans
file holds for that network and limit (the second slice's host time: what the slice loop
adds a slice). No synchronisation inside the timed loop (a call is its host time).
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import cupy

import skcontract


def _per_call_us(fn, calls: int) -> float:
    fn()
    cupy.cuda.get_current_stream().synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    cupy.cuda.get_current_stream().synchronize()
    return (time.perf_counter() - t) / calls * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--expr", default="ij,jk->ik")
    ap.add_argument("--shapes", default="64x64,64x64")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--conv", default=None)
    ap.add_argument("--nchw", action="store_true")
    ap.add_argument("--gemm", default=None, choices=("cupy", "torch"),
                    help="profile gemm() on the --shapes operands as CuPy arrays or torch "
                         "tensors, against cupy.matmul / torch.matmul")
    ap.add_argument("--network", default=None,
                    help="a bench networks name (lattice, peps, regular, circuit, ...)")
    ap.add_argument("--limit", default="1GiB", help="the plans file row's memory limit")
    ap.add_argument("--plans", default="docs/benchmarks/networks-plans-h100.json")
    args = ap.parse_args(argv)
    if args.network:
        return _profile_network(args)
    if args.conv:
        return _profile_conv(args)
    if args.gemm:
        return _profile_gemm(args)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    rs = cupy.random.RandomState(0)
    ops = [rs.standard_normal(s, dtype=cupy.float32).astype(args.dtype) for s in shapes]
    expr = skcontract.contract_expression(args.expr, *shapes, dtype=args.dtype)
    print(f"{args.expr} {args.shapes} {args.dtype}: einsum "
          f"{_per_call_us(lambda: skcontract.einsum(args.expr, *ops), args.calls):.1f} us, "
          f"expression {_per_call_us(lambda: expr(*ops), args.calls):.1f} us, "
          f"cupy.empty {_per_call_us(lambda: cupy.empty(shapes[0], args.dtype), args.calls):.1f} us")
    _profile(lambda: expr(*ops), args)
    _profile(lambda: skcontract.einsum(args.expr, *ops), args)
    return 0


def _profile(fn, args) -> None:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.calls):
        fn()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)


def _profile_network(args) -> int:
    from skcontract.bench import networks_run

    net, row, expr, plan, ops = networks_run.planned(args.network, args.limit, args.plans)
    one = lambda: expr(*ops, slices=[0])  # noqa: E731 - the calls profiled
    two = lambda: expr(*ops, slices=range(min(2, row["slices"])))  # noqa: E731
    first, both = _per_call_us(one, args.calls), _per_call_us(two, args.calls)
    print(f"{net.name} at {args.limit}: {len(plan.steps)} steps "
          f"({sum(plan.step_varies()) if plan.slicing else len(plan.steps)} a slice), "
          f"{row['slices']} slices; host a call of one slice {first:.1f} us, of two "
          f"{both:.1f} us (the second slice {both - first:.1f} us)")
    _profile(one, args)
    return 0


def _profile_gemm(args) -> int:
    from skcontract.kernels.gemm import gemm
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    rs = cupy.random.RandomState(0)
    a, b = (rs.standard_normal(s, dtype=cupy.float32).astype(args.dtype) for s in shapes)
    peer = cupy.matmul
    if args.gemm == "torch":
        import torch
        a, b = torch.from_dlpack(a), torch.from_dlpack(b)
        peer = torch.matmul
    print(f"gemm on {args.gemm} {args.shapes} {args.dtype}: ours "
          f"{_per_call_us(lambda: gemm(a, b), args.calls):.1f} us, {peer.__module__}.matmul "
          f"{_per_call_us(lambda: peer(a, b), args.calls):.1f} us (host time a call, back to "
          "back)")
    _profile(lambda: gemm(a, b), args)
    return 0


def _profile_conv(args) -> int:
    import torch
    import torch.nn.functional as F
    n, c, h, w, k, r, s, stride, pad = (int(v) for v in args.conv.split("x"))
    dt = getattr(torch, args.dtype)
    x = torch.randn(n, c, h, w, device="cuda", dtype=dt)
    wt = torch.randn(k, c, r, s, device="cuda", dtype=dt)
    if not args.nchw:
        x, wt = (t.to(memory_format=torch.channels_last) for t in (x, wt))

    def ours():
        return skcontract.conv2d(x, wt, None, stride, pad)

    def theirs():
        return F.conv2d(x, wt, None, stride, pad)

    print(f"conv2d {args.conv} {args.dtype} {'NCHW' if args.nchw else 'NHWC'}: ours "
          f"{_per_call_us(ours, args.calls):.1f} us, torch {_per_call_us(theirs, args.calls):.1f}"
          " us (host time a call, back to back)")
    _profile(ours, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
