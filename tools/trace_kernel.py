"""Where the time of one Wgmma launch goes, CTA by CTA (GPU).

    python -m tools.trace_kernel --gemm fp16-128x128x16384:stream_k:64x64x64 \\
        --conv fp16-1x512x7x7x512x3x3x1x1:auto [--grid 64] [--reduction arrival]

Builds the kernels with ``SKCONTRACT_TRACE=1`` (``sk_common.cuh``'s ``trace``: each CTA stamps
its SM clock at the ``TracePoint`` events, and the globaltimer at its start and end), runs
the case a few times, then once more with the stamps zeroed, and prints for each event the
time from the first CTA's start (microseconds; min / median / max over the CTAs that
stamped it) and the phases' lengths per CTA. The stamps cost a few stores a CTA; the traced
kernel's time is printed beside the peer's (cuBLAS or cuDNN) for scale. Only the Wgmma
kernels stamp (a launch of another family prints that nothing was stamped). A case is
``<dtype>-<shape>:<mode>[:BMxBNxBK[xCTAs]]`` (``--gemm``: MxNxK or BxMxNxK; ``--conv``:
NxCxHxWxKxRxSxstridexpad, channels-last). ``--ktiles`` adds the ring's k-tiles (the first
``KTRACE_TILES`` of each CTA; ``trace_ktile``, 3xTF32's consumers stamp none): how long a
k-tile's loads take from the producer's issue to the consumers finding them landed, how
far apart the issues and the landings are, and how many k-tiles are in flight at an issue,
over every k-tile and over those past the ring's first fill (``--skip``).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from skcontract.bench.timing import device_time_us, torch_graph_us
from skcontract.kernels import jit
from skcontract.kernels.launch import record_launches

EVENTS = ("start", "end", "first_load", "first_landed", "last_load", "mainloop_done",
          "fixup_done", "epilogue_done", "shared_waited", "shared_done", "first_split")
"""sk_common.cuh's TracePoint events from TRACE_START (slot 2) on, in order."""
PHASES = (("first split read", "start", "first_split"),
          ("first k-tile lands", "start", "first_landed"),
          ("mainloop", "first_landed", "mainloop_done"),
          ("fixup", "mainloop_done", "fixup_done"),
          ("epilogue", "fixup_done", "epilogue_done"),
          ("shared-sum wait", "epilogue_done", "shared_waited"),
          ("shared sum + store", "shared_waited", "shared_done"),
          ("whole CTA", "start", "end"))
TRACE_CTAS, TRACE_SLOTS, FIRST_CLOCK_SLOT = 1024, 16, 2
KTRACE_TILES = 256
"""sk_common.cuh's SKC_KTRACE_TILES: the k-tiles a CTA stamps (issued, landed)."""
QUANTILES = (0.0, 0.1, 0.5, 0.9, 1.0)
DTYPES = {"fp16": "float16", "bf16": "bfloat16"}
TIMED_REPS = 7


def build(kind: str, case: str, grid, reduction):
    """Functions that run the case once and its peer once, and one that times the case (our
    gemm launches on CuPy's current stream, conv2d on torch's)."""
    import torch
    import torch.nn.functional as F

    shape_dtype, mode, *forced = case.split(":")
    tile = tuple(int(v) for v in forced[0].split("x")) if forced else None
    dt, shape = shape_dtype.split("-")
    tdt = getattr(torch, DTYPES[dt])
    dims = [int(v) for v in shape.split("x")]
    extra = {k: v for k, v in (("grid", grid), ("reduction", reduction)) if v is not None}
    if kind == "gemm":
        from skcontract.kernels.gemm import gemm
        *batch, m, n, k = dims  # MxNxK or BxMxNxK
        a = torch.randn((*batch, m, k), device="cuda").to(tdt)
        b = torch.randn((*batch, k, n), device="cuda").to(tdt)
        c = torch.empty((*batch, m, n), device="cuda", dtype=tdt)
        run = lambda: gemm(a, b, c, mode=mode, tile=tile, **extra)  # noqa: E731
        return run, lambda: torch.matmul(a, b, out=c), _on_cupy_stream
    from skcontract.ops.conv2d import conv2d
    n, ch, h, w, k, r, s, stride, pad = dims
    x = torch.randn((n, ch, h, w), device="cuda").to(tdt).to(memory_format=torch.channels_last)
    wt = torch.randn((k, ch, r, s), device="cuda").to(tdt).to(memory_format=torch.channels_last)
    return (lambda: conv2d(x, wt, None, stride, pad, mode=mode, tile=tile, **extra),
            lambda: F.conv2d(x, wt, None, stride, pad), torch_graph_us)


def _on_cupy_stream(fn, calls: int, reps: int) -> float:
    import cupy

    return device_time_us(fn, cupy.cuda.Stream(non_blocking=True), calls, reps)


def stamps_of(run):
    """The launch's kernel, its stamps ((CTAs, TRACE_SLOTS) uint64) and its k-tile stamps
    ((CTAs, KTRACE_TILES, 2) uint64: issued, landed), zero where unset."""
    import cupy

    with record_launches() as launches:
        run()
    if len(launches) != 1:
        raise SystemExit(f"the case launched {len(launches)} kernels; trace one")
    launch = launches[0]
    module = next(k for k in jit._MEMO.values() if k.spec.name == launch.kernel).module
    buf = cupy.ndarray((TRACE_CTAS, TRACE_SLOTS), dtype=cupy.uint64,
                       memptr=module.get_global("skc_trace"))
    kbuf = cupy.ndarray((TRACE_CTAS, KTRACE_TILES, 2), dtype=cupy.uint64,
                        memptr=module.get_global("skc_ktrace"))
    buf.fill(0)
    kbuf.fill(0)
    run()
    cupy.cuda.runtime.deviceSynchronize()
    ctas = launch.ctas or launch.grid
    return launch, cupy.asnumpy(buf[:ctas]), cupy.asnumpy(kbuf[:ctas])


def clock_rate(stamps) -> float:
    """SM clocks per ns, pooled over the CTAs that stamped their start and end (the
    globaltimer ticks coarsely); nan where none did."""
    raw = stamps.astype(np.int64)
    start, end = FIRST_CLOCK_SLOT, FIRST_CLOCK_SLOT + 1
    ok = (raw[:, start] != 0) & (raw[:, end] != 0) & (raw[:, 1] > raw[:, 0])
    if not ok.any():
        return float("nan")
    return float((raw[ok, end] - raw[ok, start]).sum() / (raw[ok, 1] - raw[ok, 0]).sum())


def ktile_report(kstamps, rate: float, skip: int) -> list[str]:
    """The ring's k-tiles (``kstamps``: (CTAs, tiles, 2) SM clocks, issued and landed; 0
    unset) at ``rate`` clocks per ns: quantiles over every k-tile, and over those from the
    ``skip``-th of each CTA on, of the load time (issue to landed), the intervals between
    consecutive issues and landings, and the k-tiles in flight at an issue (issued before
    it, not yet landed)."""
    k = kstamps.astype(np.int64)
    issued, landed = k[..., 0], k[..., 1]
    both = (issued != 0) & (landed != 0)
    if not both.any():
        return ["no k-tile stamped (only the Wgmma ring's 16-bit, tf32 and int8 consumers)"]
    us = 1e-3 / rate
    step = both[:, 1:] & both[:, :-1]
    # in flight at k-tile t's issue: the k-tiles u < t landed after it ([cta, t, u])
    before = np.tri(k.shape[1], k=-1, dtype=bool)[None]
    flight = (before & both[:, None, :] & (landed[:, None, :] > issued[:, :, None])).sum(axis=2)
    series = {"load (us)": ((landed - issued) * us, both),
              "issue gap (us)": (np.diff(issued, axis=1) * us, step),
              "landed gap (us)": (np.diff(landed, axis=1) * us, step),
              "in flight": (flight.astype(np.float64), both)}
    lines = [f"k-tiles: {int(both.sum())} stamped in {int(both.any(axis=1).sum())} CTAs; "
             f"quantiles {', '.join(f'{q:g}' for q in QUANTILES)} (all | from k-tile {skip})"]
    for name, (v, mask) in series.items():
        tail = mask.copy()
        tail[:, :skip] = False
        parts = [" ".join(f"{x:7.3f}" for x in np.quantile(v[m], QUANTILES)) if m.any()
                 else "-" for m in (mask, tail)]
        lines.append(f"{name:<16}{parts[0]} | {parts[1]}")
    return lines


def report(stamps) -> list[str]:
    """Each event's time from the first CTA's start, and each phase's length, in us."""
    raw = stamps.astype(np.int64)
    clocks = raw[:, FIRST_CLOCK_SLOT:FIRST_CLOCK_SLOT + len(EVENTS)]
    set_ = clocks != 0
    ok = set_[:, 0] & set_[:, 1] & (raw[:, 1] > raw[:, 0])
    if not ok.any():
        return ["no CTA stamped its start and end (only the Wgmma kernels are traced)"]
    set_ &= ok[:, None]  # a CTA's events are placed from its own start
    # differences in integers first: the globaltimer counts ns since the epoch, whose
    # float64 steps are 256 ns, and the clocks count from the GPU's start
    entry = raw[ok, 0].min()
    gt0 = (raw[:, 0] - entry).astype(np.float64)
    clk = (clocks - clocks[:, :1]).astype(np.float64)
    rate = clock_rate(stamps)
    at = gt0[:, None] + clk / rate  # ns, on the globaltimer's axis
    at = np.where(set_, at / 1e3, np.nan)
    lines = [f"{len(stamps)} CTAs, SM clock {rate:.2f} GHz; us from the first CTA's start",
             f"{'event':<16}{'CTAs':>6}{'min':>8}{'median':>8}{'max':>8}"]
    for i, name in enumerate(EVENTS):
        v = at[:, i][~np.isnan(at[:, i])]
        if len(v):
            lines.append(f"{name:<16}{len(v):>6}{v.min():8.2f}{np.median(v):8.2f}{v.max():8.2f}")
    lines.append(f"{'phase':<20}{'CTAs':>6}{'min':>8}{'median':>8}{'max':>8}")
    for label, a, b in PHASES:
        d = at[:, EVENTS.index(b)] - at[:, EVENTS.index(a)]
        d = d[~np.isnan(d)]
        if len(d):
            lines.append(f"{label:<20}{len(d):>6}{d.min():8.2f}{np.median(d):8.2f}"
                         f"{d.max():8.2f}")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.trace_kernel")
    p.add_argument("--gemm", default="", help="comma list of gemm cases")
    p.add_argument("--conv", default="", help="comma list of conv2d cases")
    p.add_argument("--grid", type=int, default=None)
    p.add_argument("--reduction", default=None)
    p.add_argument("--ktiles", action="store_true", help="also report the ring's k-tiles")
    p.add_argument("--skip", type=int, default=16,
                   help="k-tiles of each CTA left out of the steady-state quantiles")
    args = p.parse_args(argv)
    os.environ["SKCONTRACT_TRACE"] = "1"  # read when a kernel is compiled (jit.get_kernel)
    cases = [("gemm", c) for c in args.gemm.split(",") if c] + [
        ("conv", c) for c in args.conv.split(",") if c]
    for kind, case in cases:
        run, peer, timed = build(kind, case, args.grid, args.reduction)
        run()
        launch, stamps, kstamps = stamps_of(run)
        calls = 200
        print(f"== {kind} {case}: {launch.kernel} grid {launch.grid} ({launch.mode}); "
              f"traced {timed(run, calls, TIMED_REPS):.2f} us, peer "
              f"{torch_graph_us(peer, calls, TIMED_REPS):.2f} us")
        print("\n".join(report(stamps)), flush=True)
        if args.ktiles:
            print("\n".join(ktile_report(kstamps, clock_rate(stamps), args.skip)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
