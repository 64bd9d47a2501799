"""Which kernels one call runs, and each one's device time, for ours and the peer (GPU).

    python -m tools.kernel_times --expr bhqk,bhkd->bhqd --shapes 32x12x197x197,32x12x197x64 \\
        [--dtype float16] [--calls 20]
    python -m tools.kernel_times --conv 64x24x56x56x144x1x1x1x0[x groups] [--dtype float16]
    python -m tools.kernel_times --network regular --limit 1GiB [--plans FILE] [--calls 3]

Runs ``skcontract.einsum`` (or ``conv2d``, channels-last) and the peer (torch.einsum, or
torch's conv2d with ``cudnn.benchmark`` on) ``--calls`` times each under torch's profiler
(CUPTI sees every kernel of the process, CuPy's and ours too) and prints one JSON line per
(side, kernel): its name, launches a call, and mean device microseconds a call. The kernels'
sum says where a call's device time goes (copies, the product, fixups); the gaps between
kernels are not counted. ``--network`` profiles calls of one slice (the second: the steps
that run once are not in it) of the ``hyper`` plan a ``bench networks`` plans file holds for
that network and limit, ours alone.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import skcontract


def _kernel_rows(fn, calls: int) -> list[dict]:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    us, count = collections.Counter(), collections.Counter()
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            us[event.name] += event.device_time_total
            count[event.name] += 1
    return [{"kernel": name[:160], "per_call": count[name] / calls, "us": us[name] / calls}
            for name in sorted(us, key=us.get, reverse=True)]


def _operands(args):
    gen = torch.Generator(device="cuda").manual_seed(0)
    dt = getattr(torch, args.dtype)
    if args.conv:
        n, c, h, w, k, r, s, stride, pad, *grouped = (int(v) for v in args.conv.split("x"))
        groups = grouped[0] if grouped else 1
        x = torch.randn((n, c, h, w), device="cuda", generator=gen).to(dt)
        wt = torch.randn((k, c // groups, r, s), device="cuda", generator=gen).to(dt)
        x, wt = (t.to(memory_format=torch.channels_last) for t in (x, wt))
        conv = (None, stride, pad, 1, groups)
        return (lambda: skcontract.conv2d(x, wt, *conv)), (lambda: F.conv2d(x, wt, *conv))
    if args.network:
        return (_network_call(args),)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    ops = [torch.randn(s, device="cuda", generator=gen).to(dt) for s in shapes]
    return (lambda: skcontract.einsum(args.expr, *ops)), (lambda: torch.einsum(args.expr, *ops))


def _network_call(args):
    """A call of the plan's second slice (its first where it has one) on random operands."""
    from skcontract.bench import networks_run

    _, row, expr, _, ops = networks_run.planned(args.network, args.limit, args.plans)
    chosen = [min(1, row["slices"] - 1)]
    return lambda: expr(*ops, slices=chosen)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.kernel_times")
    p.add_argument("--expr", default="ij,jk->ik")
    p.add_argument("--shapes", default="4096x4096,4096x4096")
    p.add_argument("--conv", default=None, help="NxCxHxWxKxRxSxstridexpad[xgroups]")
    p.add_argument("--network", default=None,
                   help="a bench networks name (lattice, peps, regular, circuit, ...)")
    p.add_argument("--limit", default="1GiB", help="the plans file row's memory limit")
    p.add_argument("--plans", default="docs/benchmarks/networks-plans-h100.json")
    p.add_argument("--dtype", default="float16")
    p.add_argument("--calls", type=int, default=20)
    args = p.parse_args(argv)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    case = args.conv or (f"{args.network} {args.limit}, one slice" if args.network else
                         f"{args.expr} {args.shapes}")
    for side, fn in zip(("ours", "peer"), _operands(args)):
        rows = _kernel_rows(fn, args.calls)
        total = sum(r["us"] for r in rows)
        for r in rows:
            print(json.dumps({"case": case, "dtype": args.dtype, "side": side, **r}), flush=True)
        print(json.dumps({"case": case, "dtype": args.dtype, "side": side, "kernel": "(sum)",
                          "us": total}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
