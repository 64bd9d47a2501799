"""GPU engine: Stream-K family GEMM kernels compiled at run time through CuPy (NVRTC).

* :mod:`.catalogue` - every kernel the engine can launch, one entry type per mainloop family
  (tile, pipeline, declared occupancy, cost-model efficiency, C++ mainloop)
* :mod:`.specs` - KernelSpec: an entry specialised for a launch (protocol, layouts, vectors)
* :mod:`.resolve` - a problem or plan step -> the schedule that launches and its entry
* :mod:`.jit` - source rendering (headers inlined), cache key, CuPy compile, per-device memo
* :mod:`.launch` / :mod:`.workspace` - split-table upload, fixup buffers per (device, stream)
* :mod:`.gemm` - ``gemm(a, b, out=None, ...)`` (``from skcontract.kernels.gemm import gemm``)
* :mod:`.operands` - ``describe(x)``: pointer, shape, strides, dtype and device of a CUDA
  array (CuPy, ``__cuda_array_interface__`` or DLPack), without importing torch

Importing this package does not import CuPy. The developer tools that compile, disassemble or
warm these kernels live in the repository's ``tools/`` (``python -m tools.compile_check``,
``tools.sass``, ``tools.warm_kernels``), outside the package.
"""
from .catalogue import CATALOGUE, Entry
from .specs import KernelSpec

__all__ = ["CATALOGUE", "Entry", "KernelSpec"]
