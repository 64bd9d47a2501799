"""Print auto's choices for the GEMM shapes of the benchmark corpus, as a markdown table.

    python -m tools.cost_report [--corpus PATH] [--dtype float16]

For every "gemm" class shape (batched included) it shows what ``gemm`` would launch on the
H200 (``DeviceInfo.h200()``, compute capability 9.0) for the benchmark's operands
(C-contiguous A and B, 16-byte aligned where their rows are): the kernel entry (family,
tile, CTAs an SM), the mode, grid, waves and predicted wave efficiency, the predicted time
and that of data-parallel on the same entry. Products with one row or column run on the Dot
family, as ``gemm`` runs them. Predictions come from the cost model, not from measurements
(those are in docs/benchmarks/gemm-h200.json). The corpus defaults to the package's own
``skcontract/bench/corpus.json`` (the one ``python -m skcontract bench gemm`` runs).
"""
from __future__ import annotations

import argparse
import json
from importlib import resources

from skcontract.kernels.catalogue import CXX_TYPES, DOT_CATALOGUE
from skcontract.kernels.forms import dot_form
from skcontract.kernels.operands import is_vec16
from skcontract.kernels.resolve import resolve_dot, resolve_gemm, rows_off_lines
from skcontract.schedule import GemmProblem
from skcontract.schedule.device import DeviceInfo
from skcontract.schedule.heuristics import DEFAULT_COST, cost_of
from skcontract.schedule.types import DATA_PARALLEL


def corpus_shapes(corpus: dict):
    """(class, batch, m, n, k) for every GEMM shape of the corpus's "gemm" classes."""
    for group in corpus["gemm"]:
        for shape in group["shapes"]:
            if isinstance(shape, dict):
                m, n, k = shape["mnk"]
                yield group["class"], int(shape.get("batch", 1)), m, n, k
            else:
                m, n, k = shape
                yield group["class"], 1, m, n, k


def load_corpus(path: str | None = None) -> dict:
    """The corpus at ``path``, or the package's own ``skcontract/bench/corpus.json``."""
    if path is None:
        text = resources.files("skcontract.bench").joinpath("corpus.json").read_text()
    else:
        with open(path) as f:
            text = f.read()
    return json.loads(text)


def choice(batch: int, m: int, n: int, k: int, dtype: str, device: DeviceInfo):
    """The :class:`~skcontract.kernels.resolve.Resolved` schedule and entry ``gemm`` runs
    C-contiguous operands of this product with on ``device`` (auto, its default
    reduction)."""
    elem = CXX_TYPES[dtype][1]
    if dtype in DOT_CATALOGUE:
        form = dot_form(batch, m, n, k, (m * k, k, 1), (k * n, n, 1), (m * n, n, 1))
        if form is not None:
            return resolve_dot(form, dtype, device)
    # fresh C-contiguous operands: A's rows K elements apart, B's N
    vec16 = is_vec16(0, k, m * k, batch, elem) and is_vec16(0, n, k * n, batch, elem)
    b_off = rows_off_lines(0, n, k * n if batch > 1 else 0, elem)
    return resolve_gemm(GemmProblem(m, n, k, batch=batch, dtype=dtype), device,
                        layouts=("row", "row"), vec16=vec16, b_off_lines=b_off)


def rows(corpus: dict, device: DeviceInfo, dtype: str = "float16"):
    for cls, batch, m, n, k in corpus_shapes(corpus):
        s, entry = choice(batch, m, n, k, dtype, device)
        same = [c for c in s.candidates if c.mode == DATA_PARALLEL and tuple(c.tile) == s.tile
                and c.ctas_per_sm == s.device.ctas_per_sm and c.cluster == s.cluster]
        dp_us = same[0].predicted_time_us if same else float("nan")
        yield dict(cls=cls, batch=batch, m=m, n=n, k=k, s=s, entry=entry, dp_us=dp_us,
                   speedup=dp_us / s.predicted_time_us)


def entry_label(entry) -> str:
    """An entry as the report names it: family, tile (a pair's unit), CTAs an SM."""
    bm, bn, bk = entry.tile
    occupancy = f"/{entry.ctas_per_sm}" if entry.ctas_per_sm > 1 else ""
    return f"{entry.FAMILY} {bm}x{bn}x{bk}{occupancy}"


def _cost_source(device: DeviceInfo) -> str:
    if cost_of(device) is DEFAULT_COST:
        return "the initial guesses of heuristics.py"
    return "constants measured on the device, see docs/benchmarks/cost-model-h200.md"


def markdown(corpus: dict, device: DeviceInfo, dtype: str = "float16") -> str:
    out = [f"auto's choices on {device.name} ({device.resident_ctas} resident CTAs), "
           f"{dtype} operands, C-contiguous. kernel = catalogue entry (family, tile: a "
           "pair's two-CTA unit, /CTAs an SM); eff = predicted wave efficiency (busy SM "
           "time / (resident CTAs x makespan)); waves = longest CTA in full-tile units; "
           "pred. = the cost model's time (it carries a launch constant: read ratios, not "
           "times); DP = data-parallel on the same entry (cost model: "
           f"{_cost_source(device)}).", "",
           "| class | shape (b x) M x N x K | kernel | auto mode | grid | waves | eff | "
           "pred. us | DP pred. us | pred. speed-up |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows(corpus, device, dtype):
        s = r["s"]
        shape = (f"{r['batch']} x " if r["batch"] > 1 else "") + f"{r['m']} x {r['n']} x {r['k']}"
        mode = s.mode + (f" S={s.splits_per_tile}" if s.mode in ("split_k", "aligned") else "")
        out.append(f"| {r['cls']} | {shape} | {entry_label(r['entry'])} | {mode} | {s.grid} | "
                   f"{s.waves:.2f} | {s.predicted_efficiency:.2f} | "
                   f"{s.predicted_time_us:.1f} | {r['dp_us']:.1f} | {r['speedup']:.2f}x |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=None, metavar="PATH",
                    help="benchmark corpus JSON (default: skcontract/bench/corpus.json)")
    ap.add_argument("--dtype", default="float16")
    args = ap.parse_args(argv)
    print(markdown(load_corpus(args.corpus), DeviceInfo.h200(), args.dtype))


if __name__ == "__main__":
    main()
