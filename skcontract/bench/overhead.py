"""Per-call overhead of a planned contraction on tiny arrays, against opt_einsum.

``python -m skcontract.bench.overhead [--repeat R] [--number N] [--out PATH]``

Both sides plan once (``skcontract.contract_expression`` and
``opt_einsum.contract_expression`` with the NumPy backend) and are then called on the
same 8x8 float64 arrays, where the arithmetic is negligible and the time is the Python
overhead of validating, binding and dispatching. The best of ``R`` repeats of ``N`` calls
is reported; ratio = skcontract / opt_einsum (below 1.0: we are faster). The results are
printed, and written as a Markdown table when ``--out`` names a file.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import timeit
from dataclasses import dataclass

import numpy as np
import opt_einsum

from ..contract import contract_expression
from .timing import positive_int, print_report

#: (subscripts, shapes) measured
CASES = (
    ("ij,jk->ik", ((8, 8), (8, 8))),
    ("ij,jk,kl->il", ((8, 8), (8, 8), (8, 8))),
    ("ii->i", ((8, 8),)),  # a view of the operand, no arithmetic
)
DEFAULT_REPEAT = 7
DEFAULT_NUMBER = 20_000
DEFAULT_OUT = os.path.join("docs", "benchmarks", "overhead-cpu.md")


@dataclass(frozen=True)
class Result:
    subscripts: str
    shapes: tuple
    ours_us: float
    opt_einsum_us: float

    @property
    def ratio(self) -> float:
        return self.ours_us / self.opt_einsum_us


def _operands(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def check(subscripts: str, shapes) -> None:
    """Both expressions agree with numpy.einsum (run before timing, never during)."""
    ops = _operands(shapes)
    ref = np.einsum(subscripts, *ops)
    ours = contract_expression(subscripts, *shapes)(*ops)
    theirs = opt_einsum.contract_expression(subscripts, *shapes)(*ops, backend="numpy")
    np.testing.assert_allclose(ours, ref, rtol=1e-12)
    np.testing.assert_allclose(theirs, ref, rtol=1e-12)


def _best_us(fn, repeat: int, number: int) -> float:
    return min(timeit.repeat(fn, repeat=repeat, number=number)) / number * 1e6


def measure(subscripts: str, shapes, repeat: int = DEFAULT_REPEAT,
            number: int = DEFAULT_NUMBER) -> Result:
    """Best per-call time in microseconds of both expressions on the same arrays."""
    ops = _operands(shapes)
    ours = contract_expression(subscripts, *shapes)
    theirs = opt_einsum.contract_expression(subscripts, *shapes)
    t_ours = _best_us(lambda: ours(*ops), repeat, number)
    t_theirs = _best_us(lambda: theirs(*ops, backend="numpy"), repeat, number)
    return Result(subscripts, tuple(shapes), t_ours, t_theirs)


def _git_head() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def render(results, repeat: int, number: int) -> str:
    lines = [
        "# Per-call overhead on the CPU: skcontract vs opt_einsum",
        "",
        f"- date: {datetime.date.today().isoformat()}",
        f"- commit: `{_git_head()}`",
        f"- machine: {platform.machine()}, {platform.processor() or 'cpu'}, "
        f"Python {platform.python_version()}, numpy {np.__version__}, "
        f"opt_einsum {opt_einsum.__version__}",
        f"- method: `python -m skcontract.bench.overhead`; both sides plan once with "
        f"`contract_expression`, then the best of {repeat} x {number} calls on float64 "
        f"arrays (opt_einsum with `backend='numpy'`)",
        "",
        "| subscripts | shapes | skcontract (us/call) | opt_einsum (us/call) | ratio |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for r in results:
        shapes = ", ".join("x".join(map(str, s)) for s in r.shapes)
        lines.append(f"| `{r.subscripts}` | {shapes} | {r.ours_us:.2f} | "
                     f"{r.opt_einsum_us:.2f} | {r.ratio:.2f} |")
    lines += ["", "ratio = skcontract / opt_einsum; below 1.0 means skcontract's per-call "
              "overhead is lower.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m skcontract bench overhead",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=positive_int, default=DEFAULT_REPEAT,
                    help="timing rounds (the best is kept)")
    ap.add_argument("--number", type=positive_int, default=DEFAULT_NUMBER,
                    help="calls a round")
    ap.add_argument("--out", default=None,
                    help=f"also write the table to this Markdown file (the committed one is "
                         f"{DEFAULT_OUT})")
    args = ap.parse_args(argv)
    for subscripts, shapes in CASES:
        check(subscripts, shapes)
    results = [measure(s, sh, args.repeat, args.number) for s, sh in CASES]
    text = render(results, args.repeat, args.number)
    print_report(text, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
