"""Work on CUDA torch tensors runs on torch's current stream and allocates through torch.

A caller's torch work is ordered on torch's current stream, and ``torch.cuda.graph``
captures that stream with torch's caching allocator routed to the graph's private pool.
So the CuPy and kernel work of a call on torch tensors goes in :func:`on_torch_stream`:
CuPy's current stream is a CuPy object over torch's current stream, and CuPy allocates
through ``torch.empty`` (the outputs, copies and fixup buffers a call makes). Inside a
capture nothing then allocates outside the graph's pool or waits on another stream; a
replay computes the product of the inputs at replay time. torch and CuPy are imported
inside the functions only: a tensor exists only once torch is imported.
"""
from __future__ import annotations

from contextlib import contextmanager

_STREAMS: dict = {}
"""(torch stream handle, device) -> a CuPy stream object over it, made once: making one per
call costs more host time than the launch. The object only names the handle, so it stays
right for as long as the handle names a stream."""


def current_handle(device: int) -> int:
    """The handle of torch's current stream on ``device``: through torch's own accessor of
    the raw handle where it has one (a few microseconds less a call than building the
    ``torch.cuda.Stream`` object), else through that object."""
    import torch  # optional dependency: only torch callers reach this

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device)
    return torch.cuda.current_stream(device).cuda_stream


def current_stream(device: int):
    """A CuPy stream object over torch's current stream on ``device``."""
    key = (current_handle(device), device)
    stream = _STREAMS.get(key)
    if stream is None:
        stream = _STREAMS[key] = _cupy_stream(*key)
    return stream


class _StreamHandle:
    """A stream handle as the CUDA stream protocol presents one (``__cuda_stream__``)."""

    __slots__ = ("handle",)

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self):
        return 0, self.handle


def _cupy_stream(handle: int, device: int):
    """A CuPy stream object over a torch stream's handle: through the CUDA stream protocol
    where CuPy has it (``Stream.from_external``), else CuPy 13's ``ExternalStream``."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    if hasattr(cupy.cuda.Stream, "from_external"):
        return cupy.cuda.Stream.from_external(_StreamHandle(handle))
    return cupy.cuda.ExternalStream(handle, device)


def _torch_malloc(size: int):
    """CuPy memory of ``size`` bytes owned by a torch tensor on the current device (freed
    through torch's allocator, on torch's current stream, when CuPy drops it)."""
    import cupy  # optional dependency: only the GPU path needs CuPy
    import torch  # optional dependency: only torch callers reach this

    dev = cupy.cuda.runtime.getDevice()
    t = torch.empty(size, dtype=torch.uint8, device=dev)
    return cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(t.data_ptr(), size, t, dev), 0)


def empty(shape: tuple, dtype: str, device: int):
    """A new torch tensor of ``shape`` and ``dtype`` (numpy's name) on ``device``, from
    torch's caching allocator on torch's current stream."""
    import torch  # optional dependency: only torch callers reach this

    return torch.empty(shape, dtype=getattr(torch, dtype), device=device)


def dtype_of(a, dtype: str):
    """The torch dtype named ``dtype`` (numpy's name) where ``a`` is a torch tensor, else
    None."""
    if not type(a).__module__.startswith("torch"):
        return None
    import torch  # optional dependency: only torch callers reach this

    return getattr(torch, dtype)


def device_of(*arrays) -> int | None:
    """The CUDA device index of the first CUDA torch tensor among ``arrays``; None when
    there is none (CPU tensors, other arrays)."""
    for a in arrays:
        if type(a).__module__.startswith("torch") and getattr(a, "is_cuda", False):
            return a.get_device()
    return None


@contextmanager
def on_torch_stream(device: int):
    """CuPy work inside runs on torch's current stream of ``device`` and allocates through
    torch's caching allocator (this thread only)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    with cupy.cuda.Device(device), current_stream(device), \
            cupy.cuda.using_allocator(_torch_malloc):
        yield
