"""skcontract: tensor contractions scheduled with Stream-K on NVIDIA GPUs.

>>> import numpy as np, skcontract
>>> a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
>>> bool(np.array_equal(skcontract.einsum("ij,jk->ik", a, b), a @ b))
True
"""
from ._version import __version__
from .contract import contract_path, einsum, tensordot, transpose
from .expression import contract_expression
from .explain import explain, explain_conv2d
from .ops.conv2d import conv2d
from .plan.path import hyper
from .schedule.device import DeviceInfo

__all__ = ["einsum", "contract_path", "contract_expression", "explain", "DeviceInfo",
           "tensordot", "transpose", "conv2d", "explain_conv2d", "hyper",
           "__version__"]
