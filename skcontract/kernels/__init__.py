"""GPU engine: Stream-K family GEMM kernels compiled at run time through CuPy (NVRTC).

* :mod:`.specs` - KernelSpec (one template instantiation) and the list the launcher chooses from
* :mod:`.jit` - source rendering (headers inlined), cache key, CuPy compile, per-device memo
* :mod:`.launch` / :mod:`.workspace` - split-table upload, fixup buffers per (device, stream)
* :mod:`.gemm` - ``gemm(a, b, out=None, ...)`` (``from skcontract.kernels.gemm import gemm``)
* :mod:`.compile_check` - NVRTC compile of every spec with no GPU (CI)

Importing this package does not import CuPy.
"""
from .specs import KernelSpec  # noqa: F401
