"""Planning cost on the CPU: ``contract_path`` and first ``einsum`` calls, against opt_einsum
and numpy measured in the same process.

``python -m skcontract.bench.planning [--repeat R] [--shapes N] [--out PATH]``

* ``contract_path`` without ``device=`` (no GPU schedule is priced): the 2-operand batched
  product 'bij,bjk->bik' of 8 x 4096 x 4096 (given as shapes, and as arrays: broadcast views
  that hold no memory) and the 20-, 40- and 80-tensor networks of
  ``opt_einsum.testing.rand_equation(n, 3, n_out=2, d_min=2, d_max=8, seed=n)`` (shapes; 32,
  62 and 122 labels), against ``opt_einsum.contract_path`` on the
  same arguments. Two figures of ours: *again* (the same call repeated: contract_path keeps
  the plans it made) and *new* (skcontract's plan and schedule caches emptied before each
  call: the cost of planning a problem not seen before). opt_einsum keeps no plans: its one
  figure is both.
* ``contract_path(..., device="h200")`` on the 20-tensor network: milliseconds per GEMM-class
  step, new and again.
* First ``einsum`` calls on shapes not seen before, against ``numpy.einsum`` with
  ``optimize=True`` (numpy's planned einsum, as ours is) and, for the 2-operand product,
  with its default ``optimize=False`` (numpy runs the chain unplanned as one loop nest over
  its 7 labels: minutes): a 6-matrix chain 'ab,bc,cd,de,ef,fg->ag' and ``N`` distinct
  shapes of 'ij,jk->ik', at dimensions of 64-256 (the arithmetic counts) and of 2-32 (the
  planning counts). Ours is timed with its default ``optimize='adaptive'`` (the greedy path
  where it costs under 2**20 FLOPs, as the chain at dims 2-32 does; above, opt_einsum's
  'auto' choice too, for 5 to 8 operands a branch search:
  :func:`skcontract.plan.path.adaptive`) and with ``optimize=True`` (greedy, numpy's
  choice). The calls of a shape run one after the other,
  in an order that turns with each shape (so that no call is always the one that finds the
  BLAS threads asleep); the total of the ``N`` calls is reported and the ratios.

Each *median* is over ``R`` runs; ratio = skcontract / reference (below 1.0: we are faster).
The machine and the commit are printed with the figures; ``--out`` also writes them to a
Markdown file.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import time

import numpy as np
import opt_einsum
from opt_einsum.testing import rand_equation

from .. import contract as C
from .. import planning
from ..contract import contract_path, einsum
from ..schedule import clear_schedule_cache
from .timing import positive_int, print_report

DEFAULT_REPEAT = 21
DEFAULT_SHAPES = 1000
PRODUCT = ("bij,bjk->bik", ((8, 4096, 4096), (8, 4096, 4096)))
NETWORK = dict(n=20, regularity=3, n_out=2, d_min=2, d_max=8, seed=20)
LARGER_NETWORKS = (40, 80)
"""Tensors in the larger networks planned without a device (labels past 52)."""
CHAIN = "ab,bc,cd,de,ef,fg->ag"
DIMS = {"64-256": (64, 256), "2-32": (2, 32)}


def forget_plans() -> None:
    """Empty the plans contract_path keeps and the scheduler's schedules: the next call plans
    as for a problem not seen before."""
    C._PATHS.clear()
    planning.RESIZABLE.clear()
    clear_schedule_cache()


def _median_ms(fn, repeat: int, before=None) -> float:
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def contract_path_rows(repeat: int) -> list[tuple]:
    """(case, ours again, ours new, opt_einsum) in milliseconds, medians."""
    subscripts, shapes = PRODUCT
    views = [np.broadcast_to(np.zeros((), np.float64), s) for s in shapes]
    cases = [
        ("'bij,bjk->bik' 8x4096x4096, shapes", (subscripts, *shapes), dict(shapes=True)),
        ("'bij,bjk->bik' 8x4096x4096, arrays", (subscripts, *views), {}),
    ]
    for n in (NETWORK["n"],) + LARGER_NETWORKS:
        eq, net = rand_equation(**{**NETWORK, "n": n, "seed": n})
        cases.append((f"{n}-tensor network, shapes", (eq, *net), dict(shapes=True)))
    rows = []
    for name, args, kw in cases:
        contract_path(*args, **kw)  # (imports and first-use work out of the figures)
        opt_einsum.contract_path(*args, **kw)
        again = _median_ms(lambda: contract_path(*args, **kw), repeat)
        new = _median_ms(lambda: contract_path(*args, **kw), repeat, forget_plans)
        theirs = _median_ms(lambda: opt_einsum.contract_path(*args, **kw), repeat)
        rows.append((name, again, new, theirs))
    return rows


def priced_rows(repeat: int) -> tuple[int, float, float]:
    """(GEMM-class steps, ms a step new, ms a step again) of the 20-tensor network planned for
    the H200 preset."""
    eq, net = rand_equation(**NETWORK)
    _, plan = contract_path(eq, *net, shapes=True, device="h200")
    steps = sum(s.is_gemm_class for s in plan.steps)
    new = _median_ms(lambda: contract_path(eq, *net, shapes=True, device="h200"),
                     max(3, repeat // 3), forget_plans)
    again = _median_ms(lambda: contract_path(eq, *net, shapes=True, device="h200"), repeat)
    return steps, new / steps, again / steps


def _distinct(rng, count: int, width: int, lo: int, hi: int, seen: set) -> list[tuple]:
    out = []
    while len(out) < count:
        dims = tuple(int(x) for x in rng.integers(lo, hi + 1, size=width))
        if dims not in seen:
            seen.add(dims)
            out.append(dims)
    return out


def first_call_rows(count: int, seed: int = 0) -> list[tuple]:
    """(case, calls, ours s, ours optimize=True s, numpy optimize=True s, numpy default s or
    None): totals of first calls on shapes not seen before."""
    rng = np.random.default_rng(seed)
    seen: set = set()
    # imports and first-use work out of the figures (dimensions none of the cases draws)
    for subscripts, n in ((CHAIN, 6), ("ij,jk->ik", 2)):
        ops = [np.ones((300, 300))] * n
        einsum(subscripts, *ops), np.einsum(subscripts, *ops, optimize=True)
    rows = []
    for dims_name, (lo, hi) in DIMS.items():
        for name, subscripts, width, calls in (
                ("6-matrix chain", CHAIN, 7, max(5, count // 10)),
                ("'ij,jk->ik'", "ij,jk->ik", 3, count)):
            plain = width == 3
            calls_of = [lambda ops: einsum(subscripts, *ops),
                        lambda ops: einsum(subscripts, *ops, optimize=True),
                        lambda ops: np.einsum(subscripts, *ops, optimize=True),
                        lambda ops: np.einsum(subscripts, *ops) if plain else None]
            totals = [0.0] * 4
            for j, dims in enumerate(_distinct(rng, calls, width, lo, hi, seen)):
                ops = [np.ones((dims[i], dims[i + 1])) for i in range(width - 1)]
                got = {}
                for c in range(j, j + 4):
                    c %= 4
                    t0 = time.perf_counter()
                    got[c] = calls_of[c](ops)
                    totals[c] += time.perf_counter() - t0
                if not np.allclose(got[0], got[2]) or not np.allclose(got[1], got[2]):
                    raise AssertionError(f"{subscripts} on {dims}: results differ")
            ours, greedy, numpy_opt, numpy_default = totals
            rows.append((f"{name}, dims {dims_name}", calls, ours, greedy, numpy_opt,
                         numpy_default if plain else None))
    return rows


def _git_head() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def render(paths, priced, firsts, repeat: int) -> str:
    lines = [
        "# Planning cost on the CPU: skcontract vs opt_einsum and numpy",
        "",
        f"- date: {datetime.date.today().isoformat()}; commit `{_git_head()}`",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPU(s), "
        f"load average {os.getloadavg()[0]:.1f}, Python {platform.python_version()}, "
        f"numpy {np.__version__}, opt_einsum {opt_einsum.__version__}, "
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}",
        f"- method: `python -m skcontract.bench.planning`; medians of {repeat} runs",
        "",
        "`contract_path` without a device (ms, median):",
        "",
        "| case | ours again | ours new | opt_einsum | again / oe | new / oe |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, again, new, theirs in paths:
        lines.append(f"| {name} | {again:.4f} | {new:.4f} | {theirs:.4f} | "
                     f"{again / theirs:.2f} | {new / theirs:.2f} |")
    steps, new, again = priced
    lines += ["", f"`contract_path(..., device='h200')`, 20-tensor network ({steps} GEMM-class "
              f"steps): {new:.3f} ms a step new, {again:.3f} ms a step again", "",
              "First `einsum` calls on shapes not seen before (total seconds; ratios: ours "
              "/ numpy's):", "",
              "| case | calls | ours | ours optimize=True | numpy optimize=True | ratio | "
              "ratio, both optimize=True | numpy default | ratio |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, calls, ours, greedy, opt, default in firsts:
        tail = "- | -" if default is None else f"{default:.4f} | {ours / default:.2f}"
        lines.append(f"| {name} | {calls} | {ours:.4f} | {greedy:.4f} | {opt:.4f} | "
                     f"{ours / opt:.2f} | {greedy / opt:.2f} | {tail} |")
    lines += ["", "ratio = skcontract / reference; below 1.0 means skcontract is faster.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m skcontract.bench.planning",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=positive_int, default=DEFAULT_REPEAT,
                    help="runs each contract_path median is taken over")
    ap.add_argument("--shapes", type=positive_int, default=DEFAULT_SHAPES,
                    help="distinct 'ij,jk->ik' shapes of the first-call figures (the chain "
                         "takes a tenth as many, at least 5)")
    ap.add_argument("--out", default=None, help="also write the figures to this Markdown file")
    args = ap.parse_args(argv)
    text = render(contract_path_rows(args.repeat), priced_rows(args.repeat),
                  first_call_rows(args.shapes), args.repeat)
    print_report(text, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
