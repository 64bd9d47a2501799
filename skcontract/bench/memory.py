"""The high-water mark of the GPU memory a block of code allocates through CuPy.

CuPy's pool reports what it holds now, not the most it held. :func:`cupy_peak` puts an
allocator in front of the current one (this thread only) that counts the bytes each
allocation asks for while it is alive; its ``peak`` is the most alive at once. Allocations
made before the block (the operands, fixup pools kept from earlier calls) are not counted,
as tracemalloc does not count them on the CPU: the figure is the block's working set, what
:mod:`skcontract.plan.slicing`'s peak model predicts.

>>> with cupy_peak() as mem:                                  # doctest: +SKIP
...     expr(*arrays)
>>> mem.peak <= expr.plan.slicing.peak_bytes                  # doctest: +SKIP
"""
from __future__ import annotations

from contextlib import contextmanager


class Peak:
    """Bytes alive now (``live``) and the most alive at once (``peak``)."""

    __slots__ = ("live", "peak")

    def __init__(self):
        self.live = 0
        self.peak = 0

    def add(self, size: int) -> None:
        self.live += size
        if self.live > self.peak:
            self.peak = self.live


class _Held:
    """Owns one counted allocation; dropping the last view of it gives it back."""

    __slots__ = ("memory", "size", "count")

    def __init__(self, memory, size: int, count: Peak):
        self.memory, self.size, self.count = memory, size, count

    def __del__(self):
        self.count.live -= self.size


@contextmanager
def cupy_peak():
    """Count the CuPy allocations made inside (this thread): yields a :class:`Peak`."""
    import cupy  # optional dependency: only the GPU benchmarks and tests need CuPy

    inner = cupy.cuda.get_allocator()
    count = Peak()

    def malloc(size: int):
        memory = inner(size)
        count.add(size)
        held = _Held(memory, size, count)
        return cupy.cuda.MemoryPointer(
            cupy.cuda.UnownedMemory(memory.ptr, size, held, memory.device_id), 0)

    with cupy.cuda.using_allocator(malloc):
        yield count
