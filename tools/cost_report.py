"""Print auto's choices for the GEMM shapes of the benchmark corpus, as a markdown table.

    python -m tools.cost_report [--corpus PATH] [--dtype float16]

For every "gemm" class shape (batched included) and each of the tiles 128x128x64 and
128x256x64 (forced), it shows the mode, grid, waves and predicted wave efficiency auto
chooses on DeviceInfo.h200(), next to data-parallel with the same tile, and the cost
model's predicted speed-up over data-parallel. Predictions come from that device's cost
model, not from measurements. The corpus defaults to the package's own
``skcontract/bench/corpus.json`` (the one ``python -m skcontract bench gemm`` runs).
"""
from __future__ import annotations

import argparse
import json
from importlib import resources

from skcontract.schedule.device import DeviceInfo
from skcontract.schedule.heuristics import DEFAULT_COST, cost_of
from skcontract.schedule.scheduler import schedule_gemm

TILES = ((128, 128, 64), (128, 256, 64))


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


def rows(corpus: dict, device: DeviceInfo, dtype: str = "float16"):
    for cls, batch, m, n, k in corpus_shapes(corpus):
        for tile in TILES:
            s = schedule_gemm(m, n, k, batch=batch, device=device, tile=tile, dtype=dtype)
            dp = schedule_gemm(m, n, k, batch=batch, device=device, tile=tile, dtype=dtype,
                               mode="data_parallel")
            yield dict(cls=cls, batch=batch, m=m, n=n, k=k, tile=tile, s=s, dp=dp,
                       speedup=dp.predicted_time_us / s.predicted_time_us)


def _cost_source(device: DeviceInfo) -> str:
    if cost_of(device) is DEFAULT_COST:
        return "the initial guesses of heuristics.py"
    return "constants measured on the device, see docs/benchmarks/cost-model-h200.md"


def markdown(corpus: dict, device: DeviceInfo, dtype: str = "float16") -> str:
    out = [f"auto's choices on {device.name} ({device.resident_ctas} resident CTAs), "
           f"{dtype} operands, tile forced. eff = predicted wave efficiency "
           "(busy SM time / (resident CTAs x makespan)); waves = longest CTA in full-tile "
           "units; speed-up = predicted DP time / predicted auto time (cost model: "
           f"{_cost_source(device)}).", "",
           "| class | shape (b x) M x N x K | tile | auto mode | grid | waves | eff | "
           "DP grid | DP waves | DP eff | pred. speed-up |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows(corpus, device, dtype):
        s, dp = r["s"], r["dp"]
        shape = (f"{r['batch']} x " if r["batch"] > 1 else "") + f"{r['m']} x {r['n']} x {r['k']}"
        mode = s.mode + (f" S={s.splits_per_tile}" if s.mode in ("split_k", "aligned") else "")
        out.append(f"| {r['cls']} | {shape} | {r['tile'][0]}x{r['tile'][1]}x{r['tile'][2]} | "
                   f"{mode} | {s.grid} | {s.waves:.2f} | {s.predicted_efficiency:.2f} | "
                   f"{dp.grid} | {dp.waves:.2f} | {dp.predicted_efficiency:.2f} | "
                   f"{r['speedup']:.2f}x |")
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
