"""What a kernel launch needs to know about an operand, read without importing torch.

:func:`describe` turns a CuPy array, any object with ``__cuda_array_interface__`` (CuPy,
Numba, PyTorch) or any object with ``__dlpack__`` (PyTorch, JAX, ...) into an
:class:`Operand`: the device address of its first element, its shape, its strides in
elements, its dtype name and its CUDA device ordinal. Only CUDA memory is accepted.

The CUDA array interface is read first; DLPack is the fallback for what the interface cannot
express (PyTorch's bfloat16 tensors raise from it). The DLPack capsule is parsed with ctypes
and left named ``dltensor``, so dropping it calls the producer's deleter as the protocol
requires. CuPy is optional and imported inside functions only.
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field

import numpy as np

from .catalogue import LINE_BYTES, VEC16_BYTES
from .forms import DotForm, dot_form, form_aligned

_BFLOAT16 = "bfloat16"  # no NumPy dtype: named here, 2 bytes


def canonical_strides(shape, strides) -> tuple[int, ...]:
    """``strides`` with 0 for each axis of ``shape`` of one element or none (never stepped
    over, so any stride reads the same): what plans check and launches pass alike."""
    return tuple(int(st) if n > 1 else 0 for n, st in zip(shape, strides))

# DLPack's device types (dlpack.h DLDeviceType): the CUDA ones are accepted, the rest named
# in the error.
_KDLCUDA, _KDLCUDA_MANAGED = 2, 13
_DL_DEVICES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan",
               8: "kDLMetal", 9: "kDLVPI", 10: "kDLROCM", 11: "kDLROCMHost", 12: "kDLExtDev",
               13: "kDLCUDAManaged", 14: "kDLOneAPI", 15: "kDLWebGPU", 16: "kDLHexagon"}
# DLPack's dtype codes (DLDataTypeCode) -> NumPy-style name prefix.
_DL_CODES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}


@dataclass(frozen=True)
class Operand:
    """A strided CUDA array: enough to launch a kernel on it, and nothing to keep it alive
    (the caller holds the array while the operand is used)."""

    ptr: int  # device address of element [0, 0, ...]
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    dtype: str  # NumPy-style name; "bfloat16" for bf16
    device_id: int  # CUDA device ordinal

    def itemsize(self) -> int:
        return 2 if self.dtype == _BFLOAT16 else np.dtype(self.dtype).itemsize


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.CFUNCTYPE(None, ctypes.c_void_p))]


# Prototypes of their own, so that ctypes.pythonapi's shared attributes stay untouched.
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def contiguous(x):
    """The CuPy array ``x`` C-contiguous: ``x`` itself where it is, else a copy. An array whose
    address is off its element size (a complex128 view of float64 memory 8 bytes off 16) is
    copied as words of the alignment it has: CuPy's own copy loads whole elements, and a
    misaligned load faults, ending the CUDA context. Copies are fresh allocations of CuPy's
    pool, 256-byte aligned."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    if x.data.ptr % x.itemsize == 0:
        return cupy.ascontiguousarray(x)
    common = math.gcd(x.data.ptr, x.itemsize, *x.strides)
    word = common & -common  # the widest power of two dividing the address and strides
    words = cupy.ndarray(x.shape + (x.itemsize // word,), f"u{word}", memptr=x.data,
                         strides=x.strides + (word,))
    return words.copy().view(x.dtype).reshape(x.shape)


def describe(x) -> Operand:
    """The :class:`Operand` of a CUDA array (CuPy, ``__cuda_array_interface__`` or
    ``__dlpack__``); TypeError for anything else or for memory that is not CUDA device
    memory."""
    module = type(x).__module__.split(".")[0]
    if module == "cupy":
        import cupy  # optional dependency: only the GPU path needs CuPy

        if isinstance(x, cupy.ndarray):
            return _from_cupy(x)
    elif module == "torch":
        op = _from_torch(x)
        if op is not None:
            return op
    op = _via_interface(x)
    if op is not None:
        return op
    if hasattr(x, "__dlpack__"):
        return _from_dlpack(x)
    raise TypeError("describe expects a CuPy array or an object with __cuda_array_interface__ "
                    f"or __dlpack__, got {_type_name(x)}")


def _type_name(x) -> str:
    t = type(x)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _elements(strides_bytes, itemsize: int) -> tuple[int, ...]:
    if any(s % itemsize for s in strides_bytes):
        raise ValueError(f"strides {tuple(strides_bytes)} bytes are not whole {itemsize}-byte "
                         "elements")
    return tuple(s // itemsize for s in strides_bytes)


def c_strides(shape) -> tuple[int, ...]:
    """The strides in elements of a C-contiguous array of ``shape``."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _from_cupy(x) -> Operand:
    return Operand(x.data.ptr, tuple(x.shape), _elements(x.strides, x.itemsize), x.dtype.name,
                   x.device.id)


_TORCH_DTYPES: dict = {}
"""torch dtype -> NumPy-style name, for the dtypes a launch may see (filled on first use)."""


def _from_torch(x) -> Operand | None:
    """A CUDA torch tensor read through its own accessors (cheaper than its
    ``__cuda_array_interface__``, and bfloat16 included); None for anything else, which
    the generic routes describe or reject."""
    import torch  # optional dependency: only torch callers reach this

    if not _TORCH_DTYPES:
        _TORCH_DTYPES.update({getattr(torch, name): name for name in (
            "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int8",
            "int16", "int32", "int64", "uint8", "bool")})
    if not isinstance(x, torch.Tensor) or not x.is_cuda:
        return None
    dtype = _TORCH_DTYPES.get(x.dtype)
    if dtype is None:
        return None
    return Operand(x.data_ptr(), tuple(x.shape), tuple(x.stride()), dtype, x.get_device())


def _via_interface(x) -> Operand | None:
    """The operand through ``x.__cuda_array_interface__``; None when x has none, or has one
    that cannot express it while ``__dlpack__`` can be tried."""
    try:
        return _from_interface(x, x.__cuda_array_interface__)
    except AttributeError:  # no interface (PyTorch: a tensor not on a GPU)
        return None
    except (TypeError, ValueError):  # PyTorch's bfloat16 tensors raise from the interface
        if hasattr(x, "__dlpack__"):
            return None
        raise


def _from_interface(x, cai: dict) -> Operand:
    if cai.get("mask") is not None:
        raise TypeError("describe: masked __cuda_array_interface__ arrays are not supported")
    dt = np.dtype(cai["typestr"])
    if dt.kind not in "biufc" or dt.byteorder not in "=|":
        raise TypeError(f"describe: unsupported __cuda_array_interface__ typestr "
                        f"{cai['typestr']!r}")
    shape = tuple(int(n) for n in cai["shape"])
    strides = cai.get("strides")
    strides = c_strides(shape) if strides is None else _elements(strides, dt.itemsize)
    ptr = int(cai["data"][0])
    return Operand(ptr, shape, strides, dt.name, _interface_device(x, ptr))


def _interface_device(x, ptr: int) -> int:
    """The interface does not name the device: ``__dlpack_device__`` does where the object
    has it, else CUDA's pointer attributes (through CuPy)."""
    if hasattr(x, "__dlpack_device__"):
        device_type, device_id = x.__dlpack_device__()
        return _cuda_device(int(device_type), int(device_id))
    try:
        import cupy  # optional dependency: only the GPU path needs CuPy
    except ImportError as e:
        raise ImportError("describe needs CuPy to find the device of a "
                          "__cuda_array_interface__ pointer") from e
    if ptr == 0:  # an empty array: no allocation to ask about
        return cupy.cuda.runtime.getDevice()
    attrs = cupy.cuda.runtime.pointerGetAttributes(ptr)
    if attrs.type not in (2, 3):  # cudaMemoryTypeDevice, cudaMemoryTypeManaged
        raise TypeError(f"describe: pointer {ptr:#x} is not CUDA device memory "
                        f"(cudaMemoryType {attrs.type})")
    return attrs.device


def _cuda_device(device_type: int, device_id: int) -> int:
    if device_type not in (_KDLCUDA, _KDLCUDA_MANAGED):
        name = _DL_DEVICES.get(device_type, "unknown")
        raise TypeError(f"describe: the operand is on DLPack device {name} ({device_type}); "
                        "only CUDA memory (kDLCUDA, kDLCUDAManaged) is accepted")
    return device_id


def _dl_dtype(dtype: _DLDataType) -> str:
    prefix = _DL_CODES.get(dtype.code)
    if prefix is None or dtype.lanes != 1:
        raise TypeError(f"describe: unsupported DLPack dtype (code {dtype.code}, bits "
                        f"{dtype.bits}, lanes {dtype.lanes})")
    name = "bool" if prefix == "bool" else f"{prefix}{dtype.bits}"
    if name != _BFLOAT16:
        np.dtype(name)  # TypeError for a width NumPy does not have (e.g. float8)
    return name


def _from_dlpack(x) -> Operand:
    capsule = x.__dlpack__()
    if not _capsule_is_valid(capsule, b"dltensor"):
        raise TypeError(f"describe: {_type_name(x)}.__dlpack__() did not return an unconsumed "
                        "'dltensor' capsule")
    t = _DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor")).dl_tensor
    device_id = _cuda_device(t.device.device_type, t.device.device_id)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = (c_strides(shape) if not t.strides
               else tuple(t.strides[i] for i in range(t.ndim)))
    return Operand((t.data or 0) + t.byte_offset, shape, strides, _dl_dtype(t.dtype), device_id)


def as3(shape, strides):
    """A 2-D operand's shape and strides as a batch of one: (batch, rows, cols) and the
    batch stride first; ValueError for other ranks."""
    if len(shape) == 2:
        return (1,) + tuple(shape), (0,) + tuple(strides)
    if len(shape) == 3:
        return tuple(shape), tuple(strides)
    raise ValueError(f"gemm takes 2-D or 3-D operands, got shape {shape}")


def matrix_layout(rows, cols, s_rows, s_cols):
    """('row', ld) when X(r, c) = p[r * ld + c]; ('col', ld) when p[c * ld + r]; else None
    (a matrix of one row or column reads either way: its ld is 0 where it has one line)."""
    if cols == 1 or s_cols == 1:
        return "row", (s_rows if rows > 1 else 0)
    if rows == 1 or s_rows == 1:
        return "col", (s_cols if cols > 1 else 0)
    return None


def is_vec16(ptr, ld, batch_stride, batch, elem) -> bool:
    """Whether an operand copies in 16-byte chunks: base address, leading dimension and
    batch stride all multiples of 16 bytes."""
    v = VEC16_BYTES
    return (ptr % v == 0 and (ld * elem) % v == 0
            and (batch <= 1 or (batch_stride * elem) % v == 0))


def rows_off_lines(ptr: int, ld: int, batch_stride: int, itemsize: int) -> bool:
    """Whether any row of an operand at address ``ptr`` whose rows are ``ld`` and batches
    ``batch_stride`` elements of ``itemsize`` bytes apart starts off a
    :data:`~.catalogue.LINE_BYTES` line (:attr:`Product.b_off_lines`)."""
    return any(x % LINE_BYTES for x in (ptr, ld * itemsize, batch_stride * itemsize))


@dataclass(frozen=True)
class Product:
    """What the launch of a batched matrix product ``x @ y`` depends on in its operands: the
    dtype, the problem, each operand's matrix layout ("row" / "col",
    :func:`matrix_layout`) and 16-byte alignment (:func:`is_vec16`), and the product's Dot
    form (:func:`.forms.dot_form`; None where it has none) with the alignment of the Dot
    kernel's loads (:func:`.forms.form_aligned`). The resolver plans a launch for
    one (:func:`.resolve.resolve_product`); a launch runs the operands of any product that
    :meth:`runs_as` it.

    ``b_off_lines`` (B's rows start off L2 lines) and ``matrices`` (the matrices each operand
    holds: 1 where its batch repeats one) inform the choice of schedule only.

    >>> p = Product("float16", 1, 64, 32, 16, ("row", "row"), (True, True))
    >>> p.runs_as(Product("float16", 1, 64, 32, 16, ("row", "row"), (True, True),
    ...                   b_off_lines=True))
    True
    """

    dtype: str
    batch: int
    m: int
    n: int
    k: int
    layouts: tuple[str, str]
    vec16: tuple[bool, bool]
    form: DotForm | None = None
    form_aligned: tuple[bool, bool] = (True, True)
    b_off_lines: bool = False
    matrices: tuple[int, int] = field(default=(1, 1))

    def runs_as(self, planned: "Product") -> bool:
        """Whether a launch planned for ``planned`` runs these operands: the same dtype,
        problem, layouts, alignment and Dot form."""
        return (self.dtype, self.batch, self.m, self.n, self.k, self.layouts, self.vec16,
                self.form, self.form_aligned) == (
            planned.dtype, planned.batch, planned.m, planned.n, planned.k, planned.layouts,
            planned.vec16, planned.form, planned.form_aligned)

    def describe(self) -> str:
        """The operands in words, as a re-planned step names them."""
        a, b = (f"{lay}-major{'' if v else ' off 16 bytes'}"
                for lay, v in zip(self.layouts, self.vec16))
        return f"{self.dtype} A {a}, B {b}"


def product_of(A: Operand, B: Operand, out_strides: tuple | None = None) -> Product | None:
    """The :class:`Product` of ``A @ B`` for 2-D or 3-D operands (batch stride first in
    ``out_strides``, the output's (batch, row, column) strides; None: a fresh C-contiguous
    output); None where an operand has no unit inner stride or a negative stride (a launch
    reads neither: the caller copies it)."""
    (ba, m, k), (sba, sam, sak) = as3(A.shape, A.strides)
    (bb, _, n), (sbb, sbk, sbn) = as3(B.shape, B.strides)
    batch = max(ba, bb)
    sba, sbb = (0 if ba == 1 else sba), (0 if bb == 1 else sbb)
    lay_a, lay_b = matrix_layout(m, k, sam, sak), matrix_layout(k, n, sbk, sbn)
    if lay_a is None or lay_b is None or min(sam, sak, sba, sbk, sbn, sbb) < 0:
        return None
    elem = A.itemsize()
    cs = (m * n, n, 1) if out_strides is None else tuple(out_strides)
    form = dot_form(batch, m, n, k, (sba, sam, sak), (sbb, sbk, sbn), cs)
    aligned = (True, True) if form is None else form_aligned(form, A.ptr, B.ptr, elem)
    return Product(A.dtype, batch, m, n, k, (lay_a[0], lay_b[0]),
                   (is_vec16(A.ptr, lay_a[1], sba, batch, elem),
                    is_vec16(B.ptr, lay_b[1], sbb, batch, elem)),
                   form, aligned,
                   rows_off_lines(B.ptr, lay_b[1], sbb if batch > 1 else 0, elem),
                   (ba if sba else 1, bb if sbb else 1))
