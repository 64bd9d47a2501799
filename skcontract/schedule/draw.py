"""Pictures of schedules: one row per CTA, time (in k-iterations) along x.

Each split is a bar coloured by its output tile (neighbouring tiles get different colours);
splits of tiles that have several peers (Stream-K / split-K fixup) are hatched and outlined,
plain data-parallel tiles are flat; the time a deterministic waiter spends spinning on its
lock is drawn as a red bar, fixup work (writing / reading partials) as a dark sliver. A
table of more than :data:`MAX_SINGLE_BARS` rows draws each CTA's runs of whole tiles as one
grey bar.
Times come from :func:`skcontract.schedule.emulate.timeline` (the cost model).

matplotlib is optional (``pip install skcontract[plot]``); it is imported only here.
"""
from __future__ import annotations

import numpy as np

from . import table as T
from .emulate import timeline


def _mpl():
    try:
        import matplotlib  # optional dependency (the plot extra)
    except ImportError as e:  # pragma: no cover - exercised only without matplotlib
        raise ImportError("draw_schedule needs matplotlib: pip install 'skcontract[plot]' "
                          "(or pip install matplotlib)") from e
    return matplotlib


def _title(s) -> str:
    p = s.problem
    shape = f"{p.batch}x" if p.batch > 1 else ""
    bm, bn, bk = s.tile
    t = f"{s.mode}: {shape}{p.m}x{p.n}x{p.k}, tile {bm}x{bn}x{bk}"
    if s.small_tile is not None:
        t += " + {}x{}".format(*s.small_tile[:2])
    t += f", {s.grid} CTAs"
    if s.num_fixup_tiles:
        t += f", {s.reduction}"
    t += f"\npredicted efficiency {s.predicted_efficiency:.2f}, {s.waves:.2f} waves"
    return t


def legend_handles(waits: bool = True):
    from matplotlib.patches import Patch  # optional dependency (the plot extra)

    handles = [Patch(facecolor="0.75", label="data-parallel tile (one split)"),
               Patch(facecolor="0.75", edgecolor="black", hatch="////",
                     label="split of a shared tile (fixup)"),
               Patch(facecolor="0.15", label="fixup: write / merge partials")]
    if waits:
        handles.append(Patch(facecolor="red", label="waiting on the tile's lock"))
    return handles


MAX_SINGLE_BARS = 2000
"""Table rows a picture draws as one bar each; beyond it each CTA's consecutive whole tiles
(one split, no wait) merge into one grey bar: tens of thousands of bars are neither legible
nor quick to draw (16471 rows took 9 s)."""


def _bars(s, tl, rows):
    """The picture's bars as (x, y, width, height, face, hatched) tuples, in drawing order."""
    t, cta = s.table, tl["cta"]
    key = t[:, T.BATCH].astype(np.int64) * (1 << 42) + t[:, T.M0].astype(np.int64) * (1 << 21) \
        + t[:, T.N0]  # a stable id per output tile: order of first appearance
    _, tile_id = np.unique(key, return_inverse=True)
    cmap = _mpl().colormaps["tab20"]
    peers, h = t[:, T.PEERS], 0.8
    plain = (peers == 1) & (tl["wait_end"] <= tl["compute_end"] + 1e-9) & \
        (tl["end"] <= tl["wait_end"] + 1e-9) & ~(tl["sum_end"] == tl["sum_end"])
    merge = len(rows) > MAX_SINGLE_BARS
    bars, i, n = [], 0, len(rows)
    while i < n:
        r = rows[i]
        if merge and plain[r]:
            j = i
            while j + 1 < n and plain[rows[j + 1]] and cta[rows[j + 1]] == cta[r]:
                j += 1
            last = rows[j]
            bars.append((tl["start"][r], cta[r] - h / 2, tl["end"][last] - tl["start"][r], h,
                         "0.75", False))
            i = j + 1
            continue
        bars.extend(_row_bars(tl, r, cmap((tile_id[r] * 7) % 20), peers[r] > 1, h))
        i += 1
    return bars


def _row_bars(tl, i, colour, multi: bool, h: float):
    """Row i's bars: its split, then its wait, its fixup work and its shared sum."""
    y, x0, x1 = tl["cta"][i], tl["start"][i], tl["compute_end"][i]
    out = [(x0, y - h / 2, x1 - x0, h, colour, bool(multi))]
    if tl["wait_end"][i] > x1 + 1e-9:
        out.append((x1, y - h / 4, tl["wait_end"][i] - x1, h / 2, "red", False))
    if tl["end"][i] > tl["wait_end"][i] + 1e-9:
        out.append((tl["wait_end"][i], y - h / 2, tl["end"][i] - tl["wait_end"][i], h, "0.15",
                    False))
    if tl["sum_end"][i] == tl["sum_end"][i]:  # a shared sum after the CTA's last row
        out.append((tl["sum_wait"][i], y - h / 4, tl["sum_start"][i] - tl["sum_wait"][i],
                    h / 2, "red", False))
        out.append((tl["sum_start"][i], y - h / 2, tl["sum_end"][i] - tl["sum_start"][i], h,
                    "0.15", False))
    return out


def draw_on_axes(s, ax, *, max_ctas: int | None = None, title: str | None = None,
                 xmax: float | None = None, legend: bool = True):
    """Draw schedule ``s`` on a matplotlib Axes (splits of shared tiles hatched; beyond
    :data:`MAX_SINGLE_BARS` rows, runs of whole tiles merged)."""
    from matplotlib.collections import PatchCollection  # optional dependency (plot extra)
    from matplotlib.patches import Rectangle

    s = s.expanded()
    tl = timeline(s)
    t = s.table
    rows = np.arange(len(t))
    if max_ctas is not None:
        rows = rows[tl["cta"] < max_ctas]
    bars = _bars(s, tl, rows.tolist())
    for hatched in (False, True):
        group = [b for b in bars if b[5] is hatched]
        if not group:
            continue
        patches = [Rectangle((x, y), w, hh) for x, y, w, hh, _, _ in group]
        faces = [f for *_, f, _ in group]
        ax.add_collection(PatchCollection(
            patches, facecolors=faces, edgecolors="black" if hatched else "none",
            linewidths=0.4 if hatched else 0.0, hatch="////" if hatched else None,
            match_original=False))
    nrows = s.grid if max_ctas is None else min(s.grid, max_ctas)
    makespan = _makespan(tl) if len(t) else 1.0
    ax.set_ylim(nrows - 0.5, -0.5)
    ax.set_xlim(0, xmax if xmax is not None else makespan * 1.02)
    ax.axvline(makespan, color="black", linestyle="--", linewidth=0.8)
    ax.set_xlabel(f"time in k-iterations of a {s.tile[0]}x{s.tile[1]}x{s.tile[2]} tile "
                  "(cost model)")
    ax.set_ylabel("CTA (persistent work unit)")
    ax.set_title(title if title is not None else _title(s), fontsize=9)
    if legend:
        waited = np.any(tl["wait_end"] > tl["compute_end"] + 1e-9) or np.any(
            tl["sum_start"] > tl["sum_wait"] + 1e-9)
        ax.legend(handles=legend_handles(waited),
                  loc="upper center", bbox_to_anchor=(0.5, -0.12 if nrows > 12 else -0.3),
                  fontsize=7, ncol=2, frameon=False)
    return ax


def _makespan(tl) -> float:
    """End of the last split or shared sum of a timeline."""
    return float(np.nanmax(np.concatenate([tl["end"], tl["sum_end"]])))


def draw_schedule(schedule, path_or_ax=None, *, max_ctas: int | None = None,
                  title: str | None = None, xmax: float | None = None, dpi: int = 150,
                  legend: bool = True):
    """Draw one schedule, or a list of schedules side by side.

    ``path_or_ax``: a file path (the figure is saved there and closed), a matplotlib Axes
    (one schedule only), or None (the new Figure is returned). ``max_ctas`` limits the rows
    drawn; ``xmax`` fixes the time axis (use the same for pictures that are compared).
    Returns the Figure (or the Axes when one was given).
    """
    mpl = _mpl()
    schedules = schedule if isinstance(schedule, (list, tuple)) else [schedule]
    if path_or_ax is not None and hasattr(path_or_ax, "add_patch"):
        if len(schedules) != 1:
            raise ValueError("draw one schedule per Axes")
        return draw_on_axes(schedules[0], path_or_ax, max_ctas=max_ctas, title=title,
                            xmax=xmax, legend=legend)
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    del mpl
    rows = max(min(s.grid, max_ctas or s.grid) for s in schedules)
    height = min(14.0, max(3.2, 2.2 + 0.075 * rows))
    fig = Figure(figsize=(5.2 * len(schedules), height))
    axes = fig.subplots(1, len(schedules), squeeze=False)
    if xmax is None and len(schedules) > 1:
        xmax = max(_makespan(timeline(s)) for s in schedules) * 1.02
    for s, ax in zip(schedules, axes[0]):
        draw_on_axes(s, ax, max_ctas=max_ctas, title=title, xmax=xmax, legend=legend)
    fig.tight_layout()
    if path_or_ax is not None:
        fig.savefig(path_or_ax, dpi=dpi)
    return fig
