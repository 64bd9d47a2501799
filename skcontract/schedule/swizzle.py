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


def tile_coords(ids, tiles_m: int, tiles_n: int, log_swz: int,
                raster: str) -> tuple[np.ndarray, np.ndarray]:
    """(m_idx, n_idx) of the tiles at positions ``ids`` of the walk (any subset, any order):
    the same arithmetic the kernels use to decode a range row's tiles (sk_scheduler.cuh,
    ``decode_tile``).

    >>> m, n = tile_coords([5, 0], 2, 3, log_swz=1, raster="N")
    >>> m.tolist(), n.tolist()
    ([1, 0], [2, 0])
    """
    if raster not in ("M", "N"):
        raise ValueError(f"raster must be 'M' or 'N', got {raster!r}")
    ids = np.asarray(ids, dtype=np.int64)
    minor_count, major_count = (tiles_m, tiles_n) if raster == "N" else (tiles_n, tiles_m)
    width = min(1 << max(0, int(log_swz)), minor_count)
    band_tiles = width * major_count              # tiles in one full band
    full_bands = minor_count // width
    band = ids // band_tiles
    in_band = ids - band * band_tiles
    # width of the band this id falls in (the last band may be narrower)
    w = np.maximum(np.where(band < full_bands, width, minor_count - full_bands * width), 1)
    minor = band * width + in_band % w
    major = in_band // w
    if raster == "N":
        return minor, major
    return major, minor


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
    return tile_coords(np.arange(tiles_m * tiles_n, dtype=np.int64), tiles_m, tiles_n,
                       log_swz, raster)


def tile_origins(ids, m: int, n: int, bm: int, bn: int, log_swz: int, raster: str):
    """Batch entry, first row / column and clipped extent of the tiles at positions ``ids``
    of a batch-major walk over (m, n) outputs cut into bm x bn tiles:
    ``(l, m0, n0, bm_clipped, bn_clipped)``, int64 arrays.

    >>> [x.tolist() for x in tile_origins([0, 7], 200, 130, 128, 128, 1, "N")]
    [[0, 1], [0, 128], [0, 128], [128, 72], [128, 2]]
    """
    ids = np.asarray(ids, dtype=np.int64)
    tm, tn = -(-m // bm), -(-n // bn)
    l, r = np.divmod(ids, tm * tn)
    mi, ni = tile_coords(r, tm, tn, log_swz, raster)
    m0, n0 = mi * bm, ni * bn
    return l, m0, n0, np.minimum(bm, m - m0), np.minimum(bn, n - n0)
