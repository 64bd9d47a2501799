"""Pictures of schedules: one row per CTA, time (in k-iterations) along x.

Each split is a bar coloured by its output tile (neighbouring tiles get different colours);
splits of tiles that have several peers (Stream-K / split-K fixup) are hatched and outlined,
plain data-parallel tiles are flat; the time a deterministic waiter spends spinning on its
lock is drawn as a red bar, fixup work (writing / reading partials) as a dark sliver.
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


def draw_on_axes(s, ax, *, max_ctas: int | None = None, title: str | None = None,
                 xmax: float | None = None, legend: bool = True):
    """Draw schedule ``s`` on a matplotlib Axes."""
    from matplotlib.patches import Rectangle  # optional dependency (the plot extra)

    s = s.expanded()
    tl = timeline(s)
    t = s.table
    cta = tl["cta"]
    rows = np.arange(len(t))
    if max_ctas is not None:
        rows = rows[cta < max_ctas]
    ntiles_colour = 20
    cmap = _mpl().colormaps["tab20"]
    # a stable id per output tile: order of first appearance of (batch, m0, n0)
    key = t[:, T.BATCH].astype(np.int64) * (1 << 42) + t[:, T.M0].astype(np.int64) * (1 << 21) \
        + t[:, T.N0]
    _, tile_id = np.unique(key, return_inverse=True)
    peers = t[:, T.PEERS]
    h = 0.8
    for i in rows.tolist():
        y = cta[i]
        x0, x1 = tl["start"][i], tl["compute_end"][i]
        colour = cmap((tile_id[i] * 7) % ntiles_colour)
        multi = peers[i] > 1
        ax.add_patch(Rectangle((x0, y - h / 2), x1 - x0, h, facecolor=colour,
                               edgecolor="black" if multi else colour,
                               linewidth=0.4 if multi else 0.0,
                               hatch="////" if multi else None))
        if tl["wait_end"][i] > x1 + 1e-9:
            ax.add_patch(Rectangle((x1, y - h / 4), tl["wait_end"][i] - x1, h / 2,
                                   facecolor="red", edgecolor="none"))
        if tl["end"][i] > tl["wait_end"][i] + 1e-9:
            ax.add_patch(Rectangle((tl["wait_end"][i], y - h / 2),
                                   tl["end"][i] - tl["wait_end"][i], h,
                                   facecolor="0.15", edgecolor="none"))
        if tl["sum_end"][i] == tl["sum_end"][i]:  # a shared sum after the CTA's last row
            ax.add_patch(Rectangle((tl["sum_wait"][i], y - h / 4),
                                   tl["sum_start"][i] - tl["sum_wait"][i], h / 2,
                                   facecolor="red", edgecolor="none"))
            ax.add_patch(Rectangle((tl["sum_start"][i], y - h / 2),
                                   tl["sum_end"][i] - tl["sum_start"][i], h,
                                   facecolor="0.15", edgecolor="none"))
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
