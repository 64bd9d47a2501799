"""Tile rasterisation with swizzle (docs/design/stream_k.md, groups and swizzle), vectorised.

Tiles are walked in bands ``2**log_swz`` tiles wide along the *minor* dimension; inside a
band the index cycles fastest across the band and then steps along the *major* dimension.

* raster ``"N"`` (along N): the band is ``2**log_swz`` tile rows (M), walked along N;
* raster ``"M"`` (along M): the band is ``2**log_swz`` tile columns (N), walked along M.

Heuristic (CUTLASS): raster along M when ``tiles_n > tiles_m``, else along N;
``log_swz = 3`` if ``min(tiles_m, tiles_n) >= 6``, 2 if ``>= 3``, 1 if ``>= 2``, else 0.
A last, narrower band (when the minor tile count is not a multiple of the band width)
keeps the same walk with its own width, so every tile appears exactly once.
"""
from __future__ import annotations

import numpy as np


def default_log_swizzle(tiles_m: int, tiles_n: int) -> int:
    lo = min(tiles_m, tiles_n)
    return 3 if lo >= 6 else 2 if lo >= 3 else 1 if lo >= 2 else 0


def default_raster(tiles_m: int, tiles_n: int) -> str:
    return "M" if tiles_n > tiles_m else "N"


def tile_order(tiles_m: int, tiles_n: int, log_swz: int | None = None,
               raster: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(m_idx, n_idx) of every tile in execution order, as int64 arrays.

    >>> m, n = tile_order(2, 3, log_swz=1, raster="N")
    >>> list(zip(m.tolist(), n.tolist()))
    [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    """
    if log_swz is None:
        log_swz = default_log_swizzle(tiles_m, tiles_n)
    if raster is None:
        raster = default_raster(tiles_m, tiles_n)
    if raster not in ("M", "N"):
        raise ValueError(f"raster must be 'M' or 'N', got {raster!r}")
    minor_count, major_count = (tiles_m, tiles_n) if raster == "N" else (tiles_n, tiles_m)
    width = 1 << max(0, int(log_swz))
    width = min(width, minor_count)
    ids = np.arange(tiles_m * tiles_n, dtype=np.int64)
    band_tiles = width * major_count              # tiles in one full band
    full_bands = minor_count // width
    band = ids // band_tiles
    in_band = ids - band * band_tiles
    # width of the band this id falls in (the last band may be narrower)
    w = np.where(band < full_bands, width, minor_count - full_bands * width)
    w = np.maximum(w, 1)
    minor = band * width + in_band % w
    major = in_band // w
    if raster == "N":
        return minor, major
    return major, minor
