"""torch tensors at the front door: torch in, torch out, on the tensors' device.

:func:`skcontract.einsum` hands torch operands here. CPU tensors are viewed as NumPy arrays
(no copy; bfloat16, which NumPy lacks, is computed in float32), CUDA tensors as CuPy arrays
through DLPack (no copy); the result comes back as a torch tensor of torch's result dtype on
the same device, shared with the array it was computed in. CUDA work runs on torch's current
stream and allocates through torch (:mod:`skcontract.kernels.torch_cuda`), so that it is
ordered with the caller's torch work and ``torch.cuda.graph`` captures it. torch is imported
only when a torch tensor arrives.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

import numpy as np

from .kernels import torch_cuda


def is_torch(x: Any) -> bool:
    """Whether ``x`` is a torch tensor, subclasses from other packages included (never
    imports torch: a tensor exists only once torch is imported)."""
    module = type(x).__module__
    if module == "torch" or module.startswith("torch."):
        return True
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def has_torch(operands: Sequence[Any], out: Any = None) -> bool:
    """Whether any operand (or ``out``) is a torch tensor (on every call: kept cheap)."""
    for x in operands:
        if is_torch(x):
            return True
    return out is not None and is_torch(out)


def run_on_torch(operands: Sequence[Any], out: Any, compute: Callable, dtype=None,
                 takes_conj: bool = False) -> Any:
    """``compute(arrays)`` on NumPy / CuPy views of the torch ``operands``; the result as
    a torch tensor of torch's result dtype (or ``dtype``), written into ``out`` when
    given. A lazy conjugate (``t.conj()``, torch's conjugate bit) is resolved into a copy,
    or, with ``takes_conj``, handed over as it lies: ``compute(arrays, lazy)``, ``lazy``
    the positions of the operands that are conjugates of the arrays given."""
    import torch  # optional dependency: only torch callers reach this

    tensors = [x if is_torch(x) else torch.as_tensor(x) for x in operands]
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise ValueError(f"einsum: operands on different devices {sorted(map(str, devices))}")
    device = devices.pop()
    res_dtype = tensors[0].dtype
    for t in tensors[1:]:
        res_dtype = torch.promote_types(res_dtype, t.dtype)
    if dtype is not None:
        res_dtype = getattr(torch, np.dtype(dtype).name)
    if device.type == "cuda":
        with torch_cuda.on_torch_stream(device.index):
            result = _run(compute, tensors, device, res_dtype, takes_conj)
    else:
        result = _run(compute, tensors, device, res_dtype, takes_conj)
    if out is not None:
        if not is_torch(out):
            raise TypeError(f"out must be a torch tensor for torch operands, got "
                            f"{type(out).__name__}")
        out.copy_(result)
        return out
    return result


def _run(compute: Callable, tensors, device, res_dtype, takes_conj=False):
    if not takes_conj:
        r = compute([_as_array(t.detach(), device) for t in tensors])
        return _as_tensor(r, device).to(res_dtype)
    lazy = tuple([i for i, t in enumerate(tensors) if t.is_conj()])
    # (conj() of a conjugate-bit tensor is the view of the memory without the bit)
    arrays = [_as_array(t.detach().conj() if i in lazy else t.detach(), device)
              for i, t in enumerate(tensors)]
    return _as_tensor(compute(arrays, lazy), device).to(res_dtype)


def permute(t, axes=None):
    """``numpy.transpose(t, axes)`` of a torch tensor, on its device: a view with its axes
    in the order ``axes`` names them (None reverses them), as ``Tensor.permute`` makes it
    (``Tensor.transpose`` swaps two axes only). ``axes`` is read, and refused, by numpy's
    own rules and errors."""
    ndim = t.dim()
    if axes is None:
        return t.permute(tuple(range(ndim - 1, -1, -1)))
    # numpy transposes a one-element probe whose strides number its axes
    probe = np.ndarray((1,) * ndim, np.int8, buffer=bytearray(1),
                       strides=tuple(range(1, ndim + 1)))
    return t.permute(tuple(st - 1 for st in np.transpose(probe, axes).strides))


def _as_array(t, device):
    import torch  # optional dependency: only torch callers reach this

    if t.dtype == torch.bfloat16:  # neither NumPy nor CuPy has it: compute in float32
        t = t.float()
    t = t.resolve_conj().resolve_neg()  # lazy conjugates and negations do not export
    if device.type == "cpu":
        return t.numpy()
    import cupy  # optional dependency: CUDA tensors run on the CuPy backend

    return cupy.from_dlpack(t)


def _as_tensor(r, device):
    import torch  # optional dependency: only torch callers reach this

    if device.type == "cpu":
        return torch.from_numpy(np.asarray(r))
    return torch.from_dlpack(r)
