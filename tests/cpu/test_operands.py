"""skcontract.kernels.operands.describe on fake CUDA arrays (no GPU): the CUDA array
interface, a DLPack capsule built here with ctypes, and what is refused."""
import ctypes
import sys

import numpy as np
import pytest

from skcontract.kernels import operands
from skcontract.kernels.operands import (Operand, _DLDataType, _DLDevice, _DLManagedTensor,
                                         _DLTensor, describe)

_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", ctypes.pythonapi))
_capsule_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_GetName", ctypes.pythonapi))
_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # DLPack's deleter, PyCapsule's destructor


class FakeInterface:
    """A CUDA array through __cuda_array_interface__ (version 3), on device 1."""

    def __init__(self, shape, typestr, strides=None, ptr=0x7F0000001000, device=(2, 1)):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "strides": strides,
                                         "data": (ptr, False), "version": 3, "stream": None}
        self.device = device

    def __dlpack_device__(self):
        return self.device


class FakeDLPack:
    """A DLPack producer: each __dlpack__() is a 'dltensor' capsule around a DLManagedTensor
    whose deleter the capsule's destructor calls while the capsule is still unconsumed."""

    def __init__(self, shape, strides=None, dtype=(4, 16, 1), device=(2, 0),
                 data=0x7F0000002000, byte_offset=0):
        self.deleted = 0
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._strides = (ctypes.c_int64 * len(strides))(*strides) if strides else None
        tensor = _DLTensor(data, _DLDevice(*device), len(shape), _DLDataType(*dtype),
                           self._shape, self._strides, byte_offset)
        self._deleter = _CALLBACK(self._delete)
        self._managed = _DLManagedTensor(tensor, None, self._deleter)
        self._destructor = _CALLBACK(self._destroy)

    def _delete(self, managed):
        self.deleted += 1

    def _destroy(self, capsule):
        if _capsule_name(capsule) == b"dltensor":
            self._managed.deleter(ctypes.addressof(self._managed))

    def __dlpack__(self, stream=None):
        return _capsule_new(ctypes.addressof(self._managed), b"dltensor",
                            ctypes.cast(self._destructor, ctypes.c_void_p))


class Both:
    """A bfloat16 tensor as PyTorch exposes it: the interface raises, DLPack works."""

    def __init__(self):
        self.dlpack = FakeDLPack((4, 8))

    @property
    def __cuda_array_interface__(self):
        raise TypeError("unsupported ScalarType BFloat16")

    def __dlpack__(self, stream=None):
        return self.dlpack.__dlpack__(stream)


def test_cuda_array_interface():
    op = describe(FakeInterface((3, 5), "<f4", strides=(4, 12)))
    assert op == Operand(0x7F0000001000, (3, 5), (1, 3), "float32", 1)
    assert op.itemsize() == 4
    c = describe(FakeInterface((2, 0, 3), "<f8"))  # strides None: C-contiguous
    assert (c.strides, c.dtype) == ((3, 3, 1), "float64")


def test_dlpack_bfloat16_with_byte_offset_and_default_strides():
    fake = FakeDLPack((4, 6), byte_offset=64)
    op = describe(fake)
    assert op == Operand(0x7F0000002000 + 64, (4, 6), (6, 1), "bfloat16", 0)
    assert op.itemsize() == 2
    assert fake.deleted == 1  # the capsule was left unconsumed and destroyed normally


def test_dlpack_strides_dtypes_and_managed_memory():
    op = describe(FakeDLPack((4, 6), strides=(1, 4), dtype=(0, 8, 1), device=(13, 2)))
    assert (op.strides, op.dtype, op.device_id) == ((1, 4), "int8", 2)
    assert describe(FakeDLPack((3,), dtype=(6, 8, 1))).dtype == "bool"
    assert describe(FakeDLPack((), dtype=(2, 16, 1))).shape == ()


def test_a_real_producers_capsule(monkeypatch):
    """NumPy's DLPack capsule (CPU memory, let through here) reads as its address, shape and
    strides: the ctypes layout is dlpack.h's."""
    monkeypatch.setattr(operands, "_cuda_device", lambda device_type, device_id: device_id)
    a = np.arange(24, dtype=np.float32).reshape(4, 6)[1:, ::2]
    assert describe(a) == Operand(a.ctypes.data, (3, 3), (6, 2), "float32", 0)


def test_interface_that_raises_falls_back_to_dlpack():
    op = describe(Both())
    assert (op.dtype, op.shape, op.ptr) == ("bfloat16", (4, 8), 0x7F0000002000)


def test_refused():
    with pytest.raises(TypeError, match="__cuda_array_interface__ or __dlpack__, got list"):
        describe([1.0, 2.0])
    with pytest.raises(TypeError, match="kDLCPU"):
        describe(FakeDLPack((2, 2), device=(1, 0)))
    with pytest.raises(TypeError, match="kDLCPU"):
        describe(np.zeros((2, 2)))  # NumPy's own DLPack capsule
    with pytest.raises(TypeError, match="kDLCUDAHost"):
        describe(FakeInterface((2,), "<f4", device=(3, 0)))
    with pytest.raises(TypeError, match="DLPack dtype"):
        describe(FakeDLPack((2,), dtype=(2, 32, 4)))  # vector lanes
    with pytest.raises(TypeError, match="typestr"):
        describe(FakeInterface((2,), "|V2"))
    with pytest.raises(ValueError, match="whole 4-byte elements"):
        describe(FakeInterface((2,), "<f4", strides=(6,)))


def test_interface_without_its_device_needs_cupy(monkeypatch):
    class NoDevice:  # the interface alone does not name the device: CuPy asks CUDA
        __cuda_array_interface__ = FakeInterface((2,), "<f4").__cuda_array_interface__

    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(ImportError, match="needs CuPy"):
        describe(NoDevice())
