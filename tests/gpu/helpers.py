"""Shared helpers of the GPU tests (reference, poisoning, schedulers)."""
from __future__ import annotations

import numpy as np

TOL = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-5, "float64": 1e-12}
LAYOUTS = [("C", "C"), ("F", "F"), ("C", "F"), ("F", "C")]
"""(A, B) orders: row-major ("C") or column-major ("F")."""
EDGE_SHAPES = [  # (batch, m, n, k)
    (1, 1, 1, 1),
    (1, 1, 300, 40),        # M = 1
    (1, 300, 1, 72),        # N = 1
    (1, 128, 128, 32),      # one tile, one k-tile
    (1, 64, 64, 16),        # K < BK
    (1, 200, 136, 100),     # K not a multiple of BK
    (1, 257, 383, 3000),    # ragged, long K: Stream-K splits
    (1, 1024, 768, 256),    # many tiles
    (3, 130, 70, 900),      # batched
]
"""GEMM shapes at the edges of the tiles, the k-tiles and the splits."""


def schedule_gemm(*args, **kwargs):
    try:
        from skcontract.schedule import schedule_gemm as f
    except ImportError:
        from skcontract.schedule.scheduler import schedule_gemm as f
    return f(*args, **kwargs)


def cupy_dtype(name):
    import cupy
    if name == "bfloat16":
        try:
            import ml_dtypes
            return np.dtype(ml_dtypes.bfloat16)
        except ImportError:
            return None
    return cupy.dtype(name)


def rand(shape, dtype, order="C", seed=0):
    """Random operand of ``dtype`` (torch for bf16 when CuPy lacks bfloat16)."""
    import cupy
    rs = cupy.random.RandomState(seed)
    x = rs.standard_normal(shape, dtype=cupy.float32) * 0.5
    if dtype == "bfloat16":
        import torch
        t = torch.as_tensor(x, device="cuda").to(torch.bfloat16)
        if order == "F":
            t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
        return t
    x = x.astype(dtype)
    return cupy.asfortranarray(x) if order == "F" and x.ndim == 2 else (
        cupy.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2) if order == "F" else x)


def to64(x):
    import cupy
    if hasattr(x, "data_ptr"):
        import torch
        return cupy.asarray(x.to(torch.float64))
    return x.astype(cupy.float64)


def poisoned(shape, like, order="C"):
    """Output filled with NaN (so an unwritten element fails the check)."""
    import cupy
    if hasattr(like, "data_ptr"):
        import torch
        t = torch.full(shape, float("nan"), dtype=like.dtype, device=like.device)
        if order == "F":
            t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
        return t
    x = cupy.full(shape, np.nan, dtype=like.dtype)
    if order == "F":
        x = cupy.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)
    return x


def rel_error(out, ref) -> float:
    import cupy
    o = to64(out)
    if not bool(cupy.isfinite(o).all()):
        return float("inf")
    return float(cupy.linalg.norm(o - ref) / max(float(cupy.linalg.norm(ref)), 1e-300))


def as_bytes(x) -> bytes:
    import cupy
    if hasattr(x, "data_ptr"):
        return x.view(dtype=__import__("torch").int16).cpu().numpy().tobytes()
    return cupy.asnumpy(x).tobytes()


def poison_in_place(x):
    """Refill ``x`` with NaN in place, on the stream the products run on."""
    if hasattr(x, "data_ptr"):
        x.fill_(float("nan"))
    else:
        x.fill(float("nan"))


def launch_chain(steps, writer_plan, outputs):
    """The back-to-back chain of the dependent-launch tests: ``steps`` are four launches
    (write P, read P, read Q, write Q). Their plans are made first (a plan's first call
    synchronises): the first three run once, ``writer_plan()`` makes the fourth's on a
    buffer of Q's shape. Then ``outputs`` are poisoned and the four run with no
    synchronisation between them; returns what they launched (``record_launches``)."""
    import cupy

    from skcontract.kernels.launch import record_launches
    for step in steps[:3]:
        step()
    writer_plan()
    for buf in outputs:
        poison_in_place(buf)
    with record_launches() as launched:
        for step in steps:
            step()
    cupy.cuda.get_current_stream().synchronize()
    return launched
