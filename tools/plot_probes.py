"""A picture of what bounds a Wgmma tile: its time in full, with its loads alone and with its
wgmmas alone (the probe builds), against cuBLAS on the same product.

    python -m tools.plot_probes probes.jsonl [more.jsonl ...] --out probes.png
        [--cases 512x1024x8192:64x64x64,...]

Reads ``tools.time_gemm --probe none,loads,mma --peer`` rows (JSON lines or a JSON list; a
row has ``shape``, ``tile``, ``probe`` and ``us``, the peer's ``torch_us`` where timed) and
draws one group of bars a (shape, tile): the median over its rows of each probe, with
cuBLAS's median on the shape as a line across the group. ``--cases`` picks and orders the
groups (``shape:tile``, the tile as time_gemm's ``--tile`` spells it); by default every group
with a full time, in the order first seen.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

PROBES = (("none", "full"), ("loads", "loads alone"), ("mma", "wgmmas alone"))
"""The probes drawn, in order, and their legend labels."""


def read_rows(paths) -> list[dict]:
    rows = []
    for path in paths:
        with open(path) as f:
            text = f.read().strip()
        if text.startswith("["):
            rows += json.loads(text)
        else:
            rows += [json.loads(line) for line in text.splitlines() if line.strip()]
    return [r for r in rows if "us" in r]


def tile_name(tile) -> str:
    return "x".join(str(v) for v in tile) if tile else "auto"


def groups(rows, cases=None) -> list[dict]:
    """One dict a (shape, tile): ``label``, the median time of each probe present
    (``times``) and cuBLAS's median on the shape (``peer``, None if untimed)."""
    peer: dict[str, list[float]] = {}
    times: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r in rows:
        if "torch_us" in r:
            peer.setdefault(r["shape"], []).append(r["torch_us"])
        key = (r["shape"], tile_name(r.get("tile")))
        times.setdefault(key, {}).setdefault(r.get("probe") or "none", []).append(r["us"])
    keys = ([tuple(c.split(":")) for c in cases] if cases else
            [k for k, v in times.items() if "none" in v])
    out = []
    for shape, tile in keys:
        t = times.get((shape, tile), {})
        out.append({"label": f"{tile}\n{shape}",
                    "times": {p: statistics.median(v) for p, v in t.items()},
                    "peer": statistics.median(peer[shape]) if shape in peer else None})
    return out


def draw(groups_, out: str, title: str) -> None:
    import matplotlib  # optional dependency: only this picture needs it
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.26
    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * len(groups_), 4.2))
    for j, (probe, label) in enumerate(PROBES):
        xs = [i + (j - 1) * width for i, g in enumerate(groups_) if probe in g["times"]]
        ys = [g["times"][probe] for g in groups_ if probe in g["times"]]
        ax.bar(xs, ys, width, label=label)
    for i, g in enumerate(groups_):
        if g["peer"] is not None:
            ax.hlines(g["peer"], i - 1.6 * width, i + 1.6 * width, colors="black",
                      label="cuBLAS" if i == 0 else None)
    ax.set_xticks(range(len(groups_)), [g["label"] for g in groups_], fontsize=8)
    ax.set_ylabel("us (CUDA-graph replay)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.plot_probes")
    p.add_argument("rows", nargs="+", help="time_gemm --probe outputs")
    p.add_argument("--out", required=True)
    p.add_argument("--cases", default=None, help="comma list of shape:tile")
    p.add_argument("--title", default="What bounds a Wgmma tile (fp16, data-parallel, H200)")
    args = p.parse_args(argv)
    chosen = groups(read_rows(args.rows), args.cases.split(",") if args.cases else None)
    draw(chosen, args.out, args.title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
