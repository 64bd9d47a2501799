"""Where a kernel's warps wait, by SASS instruction, from Nsight Compute's source page.

    ncu --section WarpStateStats --section SourceCounters --page source --print-source sass \\
        --csv python -m tools.ncu_cases --cases fp16-512x1024x4096:cublas > cublas.csv
    python -m tools.ncu_stalls cublas.csv [--top 25] [--all]

Prints, for each kernel in the file, its sampled warp stalls in all, then the instructions
with the most samples (their share of the kernel's samples, times executed, the SASS and
their three largest stall reasons); ``--all`` prints every instruction in address order
with its samples instead (to read a loop as the compiler laid it out). Reads the CSV that
ncu writes per kernel: a ``"Kernel Name"`` line, then a header line starting ``"Address"``
and one line an instruction (``tools/device_run.sh narrow`` writes these).
"""
from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass, field

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
STALL_PREFIX = "stall_"
NOT_ISSUED = "(Not Issued)"


@dataclass
class Kernel:
    """One kernel's instructions: each a dict of the source page's columns."""
    name: str
    header: list[str] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)

    def samples(self, row: dict) -> float:
        return number(row.get(SAMPLES, ""))

    def total(self) -> float:
        return sum(self.samples(r) for r in self.rows)

    def stalls(self, row: dict) -> list[tuple[float, str]]:
        """(samples, reason) of the row's stall reasons, largest first."""
        reasons = [k for k in self.header if k.startswith(STALL_PREFIX) and NOT_ISSUED not in k]
        return sorted(((number(row[k]), k[len(STALL_PREFIX):]) for k in reasons
                       if number(row[k]) > 0), reverse=True)


def number(text: str) -> float:
    """A CSV cell as a number (ncu writes thousands with commas); 0 for an empty cell."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def read(lines) -> list[Kernel]:
    """The kernels of an ncu ``--page source --csv`` output (other lines are skipped)."""
    kernels: list[Kernel] = []
    for cells in csv.reader(line for line in lines if line.startswith('"')):
        if not cells:
            continue
        if cells[0] == "Kernel Name":
            kernels.append(Kernel(cells[1]))
        elif cells[0] == "Address" and kernels:
            kernels[-1].header = cells
        elif kernels and kernels[-1].header and len(cells) == len(kernels[-1].header):
            kernels[-1].rows.append(dict(zip(kernels[-1].header, cells)))
    return kernels


def report(kernel: Kernel, top: int = 25, every: bool = False) -> list[str]:
    """Lines: the kernel's stall reasons in all, then its top instructions (or all)."""
    total = kernel.total() or 1.0
    by_reason: dict[str, float] = {}
    for row in kernel.rows:
        for n, reason in kernel.stalls(row):
            by_reason[reason] = by_reason.get(reason, 0.0) + n
    reasons = sorted(by_reason.items(), key=lambda kv: -kv[1])
    out = [f"== {kernel.name}: {len(kernel.rows)} instructions, {kernel.total():.0f} samples",
           "stalls: " + ", ".join(f"{r} {100 * n / total:.1f}%" for r, n in reasons[:8])]
    rows = kernel.rows if every else sorted(kernel.rows, key=lambda r: -kernel.samples(r))[:top]
    for row in rows:
        share = 100 * kernel.samples(row) / total
        why = " ".join(f"{r}={n:.0f}" for n, r in kernel.stalls(row)[:3])
        out.append(f"{row['Address'][-6:]:>6} {share:5.1f}% x{row.get(EXECUTED, ''):>8} "
                   f"{row['Source'][:72]:72} {why}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.ncu_stalls")
    p.add_argument("csv", nargs="+", help="ncu --page source --csv outputs")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--all", action="store_true", help="every instruction, in address order")
    args = p.parse_args(argv)
    for path in args.csv:
        with open(path) as f:
            for kernel in read(f):
                print("\n".join(report(kernel, args.top, args.all)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
