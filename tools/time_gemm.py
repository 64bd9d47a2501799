"""Device time of ``gemm`` (auto) on a few shapes, for A/B runs of two trees (GPU).

    cd <tree> && PYTHONPATH=<tree>:<checkout> python -m tools.time_gemm \\
        --shapes 4x4096x4096,16x4096x4096 --dtypes float32,float64 [--reps 15]

Prints one JSON line per (shape, dtype): CUDA-graph replay time in microseconds (the median
of ``--reps``), timed by this checkout's ``skcontract/bench/timing.py`` whatever the tree;
``--peer`` adds torch.matmul (cuBLAS) on the same operands, timed by torch's graph replay,
and the ratio; ``--mode`` / ``--tile`` (BMxBNxBK[xCTAs an SM[xCTAs a unit]]: ``x2`` last
names a cluster pair, whose unit tile a single CTA's may equal) / ``--reduction`` /
``--grid`` force a schedule mode, an entry, a fixup protocol or a grid; each takes a comma
list, and every combination is timed (one line each, carrying the peer's time when there is one; a
combination the scheduler refuses prints its error; ``--dtypes tf32``: float32 with tf32
allowed on both sides, B column-major; ``--dtypes 3xtf32``: float32 at precision "3xtf32",
B column-major, against exact float32 on the peer's side). ``--layouts rr,rc,cr,cc`` times
each pair of A's and B's orders (``r`` row-major, ``c`` column-major; each row says its
``layout``), the peer on the same operands. ``--probe none,loads,mma`` times the Wgmma
kernels' probe builds too (``SKCONTRACT_PROBE``: the mainloop's loads alone, its wgmmas
alone; their outputs are wrong), which tell what bounds a tile. ``--store tma,threads``
times the Wgmma epilogue's two store paths (the library's rule,
:func:`skcontract.kernels.tma.output_map`, with every size allowed, or with none); each
such row says whether a launch stored by TMA (``tma_store``). ``--stages 6,8,13`` (with
``--tile``) times the forced entry with each ring depth: the catalogue entries that tile
forces are replaced, in this process and for that row only, by copies with that many
stages (the entry's own count, ``stages`` in the row; ``default`` keeps the catalogue's).
``--walk G:R:S,...`` (with ``--tile`` and a mode other than auto) times the forced tile's
plan with Stream-K groups ``G``, raster ``R`` (``N`` or ``M``) and log2 swizzle band ``S``,
each a number or ``auto`` (the scheduler's rule), e.g. ``auto:N:3,1:M:0``: these set which
CTA runs which tile (docs/design/stream_k.md); each row says the ``walk`` asked, the
``planned_mode``, ``groups``, ``raster``, ``swizzle`` and ``entry`` of its plan, or the
planner's refusal (a group count or swizzle the kernels cannot run).
16-bit operands are made by torch (CuPy has no bfloat16). ``python -m`` puts the working
directory first on ``sys.path``, so ``skcontract`` comes from the directory it runs in (then
``PYTHONPATH``): run it from the tree to time, with this checkout on ``PYTHONPATH`` for the
tools (``tools/device_run.sh ab`` does); each row's ``tree`` names the ``skcontract`` that
ran. Running it alternately over two trees in one device session compares them on the same
machine state.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import itertools
import json
import os
import sys
from pathlib import Path

#: this checkout's timing helpers, loaded by path: the tree being timed may predate them
TIMING_PY = Path(__file__).resolve().parents[1] / "skcontract" / "bench" / "timing.py"


def _timing():
    spec = importlib.util.spec_from_file_location("_skcontract_timing", TIMING_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.time_gemm")
    p.add_argument("--shapes", required=True, help="comma list of MxNxK or BxMxNxK")
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--tag", default="")
    p.add_argument("--peer", action="store_true", help="also time torch.matmul")
    p.add_argument("--mode", default="auto", help="comma list of modes")
    p.add_argument("--tile", default=None,
                   help="comma list of BMxBNxBK[xCTAs an SM[xCTAs a unit]] entries to force")
    p.add_argument("--reduction", default=None,
                   help="comma list of deterministic, arrival, atomic (default: gemm's)")
    p.add_argument("--grid", default=None, help="comma list of grids to force")
    p.add_argument("--layouts", default=None,
                   help="comma list of A and B orders: rr, rc, cr, cc (r: row-major)")
    p.add_argument("--probe", default=None,
                   help="comma list of none, loads, mma: the Wgmma kernels' probe builds")
    p.add_argument("--store", default=None,
                   help="comma list of tma, threads: the Wgmma epilogue's store path")
    p.add_argument("--stages", default=None,
                   help="comma list of ring depths (or default) for the --tile entries")
    p.add_argument("--walk", default=None,
                   help="comma list of GROUPS:RASTER:SWIZZLE (each a value or auto) for "
                        "the --tile schedule")
    args = p.parse_args(argv)
    tiles = [None] if args.tile is None else [None if t == "none" else
                                              tuple(int(x) for x in t.split("x"))
                                              for t in args.tile.split(",")]
    reductions = [None] if args.reduction is None else args.reduction.split(",")
    grids = [None] if args.grid is None else [int(g) for g in args.grid.split(",")]
    stores = [None] if args.store is None else args.store.split(",")
    probes = [None] if args.probe is None else args.probe.split(",")
    if args.stages is not None and args.tile is None:
        p.error("--stages needs --tile: it sets the ring depth of the forced entries")
    try:
        stages = [None] if args.stages is None else [None if x == "default" else int(x)
                                                     for x in args.stages.split(",")]
    except ValueError:
        p.error(f"--stages {args.stages!r}: expected ring depths or default")
    try:
        walks = [None] if args.walk is None else [parse_walk(w) for w in args.walk.split(",")]
    except ValueError as e:
        p.error(str(e))
    if args.walk is not None and (args.tile is None or "auto" in args.mode.split(",")):
        p.error("--walk needs --tile and a mode other than auto: it plans that tile's table")
    combos = list(itertools.product(args.mode.split(","), tiles, reductions, grids, stores,
                                    probes, stages, walks))
    import cupy  # optional dependency: this tool times the GPU

    # skcontract is imported in _time_shape, after PYTHONPATH picked the tree to time; both
    # trees are timed by this checkout's helpers, so they time alike
    timing = _timing()

    layouts = [(None, None)] if args.layouts is None else [tuple(x) for x in
                                                           args.layouts.split(",")]
    stream = cupy.cuda.Stream(non_blocking=True)
    for shape in args.shapes.split(","):
        batch, (m, n, k) = _dims(shape)
        flops = 2.0 * batch * m * n * k
        for dtype in args.dtypes.split(","):
            tf32, x3 = dtype == TF32, dtype == TF32X3
            a0, b0, c = _operands(batch, m, n, k, "float32" if tf32 or x3 else dtype,
                                  args.peer, tf32 or x3)
            for layout in layouts:
                a, b = _laid_out(a0, layout[0]), _laid_out(b0, layout[1])
                _time_shape(args, combos, timing, stream, shape, dtype,
                            None if layout[0] is None else "".join(layout), a, b, c, flops)
    return 0


def _device_time(timing, fn, a, stream, calls: int, reps: int) -> float:
    """Per-call device time of ``fn`` by graph replay: on torch's stream for torch operands
    (gemm() runs torch tensors on torch's current stream, which a capture on the CuPy
    ``stream`` would not see), on ``stream`` for CuPy arrays."""
    if type(a).__module__.split(".")[0] == "torch":
        return timing.torch_graph_us(fn, calls, reps)
    return timing.device_time_us(fn, stream, calls, reps)


def _time_shape(args, combos, timing, stream, shape, dtype, layout, a, b, c, flops):
    """One JSON line a combination of ``combos`` on operands ``a``, ``b`` (``layout``: their
    orders, None for the operands as made), with the peer's time on the same operands."""
    import skcontract
    import cupy  # optional dependency: this tool times the GPU
    from skcontract.kernels import tma
    from skcontract.kernels.gemm import clear_plans, gemm
    from skcontract.kernels.launch import record_launches
    from skcontract.kernels.resolve import device_info
    tf32, x3 = dtype == TF32, dtype == TF32X3
    calls = timing.calls_for(flops)
    peer = {}
    if args.peer:
        import torch  # the peer
        torch.backends.cuda.matmul.allow_tf32 = tf32
        peer["torch_us"] = timing.torch_graph_us(
            lambda: torch.matmul(a, b, out=c), calls, args.reps)
    # (allow_tf32 for tf32: older trees take no precision)
    forced_tf32 = {"allow_tf32": True} if tf32 else {"precision": TF32X3} if x3 else {}
    batch, (m, n, k) = _dims(shape)
    orders = {"r": "row", "c": "col"}
    layouts = ("row", "row") if layout is None else tuple(orders[x] for x in layout)
    for mode, tile, reduction, grid, store, probe, depth, walk in combos:
        forced = {k_: v for k_, v in (("tile", tile), ("grid", grid),
                                      ("reduction", reduction)) if v is not None}
        forced.update(forced_tf32)
        sched, refused = None, None
        if walk is not None:
            try:
                sched = walk_schedule(m, n, k, batch, dtype, mode, tile, grid, reduction, walk,
                                      layouts, device_info(cupy.cuda.runtime.getDevice()))
                forced = {"schedule": sched, **forced_tf32}
            except (ValueError, TypeError, RuntimeError) as e:  # the planner refuses it
                refused = f"{type(e).__name__}: {e}"
        if store is not None:
            tma.STORE_MIN_OUTPUTS = 0 if store == "tma" else STORE_NEVER
        row = {"tag": args.tag, "tree": skcontract.__file__, "shape": shape,
               "dtype": dtype, "mode": mode,
               **{k_: v for k_, v in forced.items() if k_ != "schedule"}, **peer}
        if layout is not None:
            row["layout"] = layout
        if probe is not None:
            os.environ["SKCONTRACT_PROBE"] = row["probe"] = probe
        if depth is not None:
            row["stages"] = depth
        if walk is not None:
            row["walk"] = ":".join("auto" if v is None else str(v) for v in walk)
            if refused is not None:
                print(json.dumps({**row, "error": refused}), flush=True)
                continue
            plan = sched.schedule
            row.update(planned_mode=str(plan.mode), groups=plan.groups, raster=plan.raster,
                       swizzle=plan.log_swizzle, tile=tile, grid=plan.grid,
                       reduction=str(plan.reduction), entry=sched.entry.name)
        if probe is not None or store is not None or args.stages is not None:
            # a cached plan keeps the kernel (its probe build, its entry's stages) and the
            # store path it was made with
            clear_plans()
        try:
            with _stages_swapped(tile, depth):
                if store is not None:  # what the launches did, not only what was asked
                    with record_launches() as launched:
                        gemm(a, b, c, **_call_args(mode, forced))
                    row["store"] = store
                    row["tma_store"] = any(x.tma_store for x in launched)
                call = _call_args(mode, forced)
                us = _device_time(timing, lambda: gemm(a, b, c, **call), a, stream, calls,
                                  args.reps)
            row.update(us=us, tflops=flops * 1e-6 / us)
            if peer:
                row["vs_torch"] = peer["torch_us"] / us
        except Exception as e:  # noqa: BLE001 - report the refused combination
            row["error"] = f"{type(e).__name__}: {e}"
        finally:
            os.environ.pop("SKCONTRACT_PROBE", None)
        print(json.dumps(row), flush=True)


@contextlib.contextmanager
def _stages_swapped(tile, depth):
    """Within the block, the catalogue entries (offered and pending) that ``tile`` forces
    (``--tile``'s numbers, matched as ``gemm``'s ``tile=`` matches them) are copies with
    ``depth`` stages (an entry's own count: a 3xTF32 stage holds two boxes' worth); None
    leaves them. ValueError when no entry matches."""
    if depth is None:
        yield
        return
    from skcontract.kernels import catalogue

    def forced_by_tile(b):
        return (*b.tile, b.ctas_per_sm, b.CLUSTER)[:len(tile)] == tuple(tile)

    tables = (catalogue.CATALOGUE, catalogue.PENDING)
    saved = [dict(t) for t in tables]
    try:
        swapped = 0
        for table in tables:
            for key, entries in table.items():
                table[key] = tuple(dataclasses.replace(b, stages=depth) if forced_by_tile(b)
                                   else b for b in entries)
                swapped += sum(map(forced_by_tile, entries))
        if not swapped:
            raise ValueError(f"--stages: no catalogue entry has the tile {tile}")
        yield
    finally:
        for table, old in zip(tables, saved):
            table.clear()
            table.update(old)


def _dims(shape: str):
    """``(batch, (m, n, k))`` of a ``MxNxK`` or ``BxMxNxK`` shape."""
    dims = [int(x) for x in shape.split("x")]
    return (dims[0] if len(dims) == 4 else 1), tuple(dims[-3:])


def _call_args(mode, forced) -> dict:
    """``gemm``'s keywords for one row: a planned schedule is launched as it is."""
    return forced if "schedule" in forced else {"mode": mode, **forced}


def parse_walk(text: str) -> tuple:
    """``(groups, raster, swizzle)`` of a ``--walk`` item ``G:R:S`` (``auto``: None)."""
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(f"--walk {text!r}: expected GROUPS:RASTER:SWIZZLE")
    g, r, sw = (None if p_ == "auto" else p_ for p_ in parts)
    if r not in (None, "N", "M"):
        raise ValueError(f"--walk {text!r}: the raster is N, M or auto")
    try:  # (their ranges are the scheduler's to check)
        return (None if g is None else int(g)), r, (None if sw is None else int(sw))
    except ValueError:
        raise ValueError(f"--walk {text!r}: groups and swizzle are numbers or auto") from None


def walk_schedule(m, n, k, batch, dtype, mode, tile, grid, reduction, walk,
                  layouts=("row", "row"), device=None):
    """The plan of the forced ``tile`` (as ``--tile`` names it) with ``walk``'s groups, raster
    and swizzle (None: the scheduler's rule), resolved as ``gemm(tile=...)`` resolves it (the
    entry at its own occupancy, for operands in ``layouts``) on ``device`` (default: the
    H200 preset), for ``gemm(schedule=...)``."""
    from skcontract.kernels.gemm import DEFAULT_REDUCTION
    from skcontract.kernels.resolve import resolve_gemm
    from skcontract.schedule import DeviceInfo, GemmProblem
    options = {k_: v for k_, v in zip(("groups", "raster", "swizzle"), walk) if v is not None}
    if grid is not None:
        options["grid"] = grid
    precision = {TF32: "tf32", TF32X3: TF32X3}.get(dtype)
    return resolve_gemm(GemmProblem(m, n, k, batch=batch,
                                    dtype="float32" if precision else dtype),
                        device if device is not None else DeviceInfo.h200(), mode=mode,
                        tile=tuple(tile), reduction=reduction or DEFAULT_REDUCTION,
                        precision=precision, layouts=layouts, **options)


def _laid_out(x, order):
    """``x`` (a torch tensor or CuPy array) with its last two dimensions row-major (``r``) or
    column-major (``c``); None: as made."""
    if order is None or order == "r":
        return x
    t = x.swapaxes(-1, -2)
    t = t.contiguous() if hasattr(t, "contiguous") else t.copy(order="C")
    return t.swapaxes(-1, -2)


STORE_NEVER = 1 << 62
"""--store threads: a size no product reaches."""
TF32 = "tf32"
"""--dtypes tf32: float32 operands with tf32 allowed (ours and the peer's), B column-major
(K-major, which tf32 wgmma reads in place)."""
TF32X3 = "3xtf32"
"""--dtypes 3xtf32: float32 operands at precision "3xtf32" (the peer's exact), B column-major."""


def _operands(batch, m, n, k, dtype, use_torch, col_b=False):
    """Random A (m x k), B (k x n) and an output C (each with a leading batch dimension when
    ``batch > 1``), as torch tensors for 16-bit dtypes or a torch peer, else CuPy arrays;
    ``col_b``: B column-major."""
    lead = (batch,) if batch > 1 else ()
    if use_torch or dtype in ("float16", "bfloat16"):
        import torch  # the peer, and CuPy has no bfloat16
        g = torch.Generator(device="cuda").manual_seed(0)
        dt = getattr(torch, dtype)
        a = torch.randn(*lead, m, k, device="cuda", generator=g).to(dt)
        b = torch.randn(*lead, k, n, device="cuda", generator=g).to(dt)
        if col_b:
            b = b.transpose(-1, -2).contiguous().transpose(-1, -2)
        return a, b, torch.empty(*lead, m, n, device="cuda", dtype=dt)
    import cupy  # optional dependency: this tool times the GPU
    rs = cupy.random.RandomState(0)
    b = rs.standard_normal(lead + (k, n)).astype(dtype)
    if col_b:
        b = cupy.ascontiguousarray(b.swapaxes(-1, -2)).swapaxes(-1, -2)
    return (rs.standard_normal(lead + (m, k)).astype(dtype), b,
            cupy.empty(lead + (m, n), dtype=dtype))


if __name__ == "__main__":
    sys.exit(main())
