"""``conv2d``: a 2-D convolution with ``torch.nn.functional.conv2d``'s semantics, as an
implicit GEMM.

    out = conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)

``input`` is (N, C, H, W) or unbatched (C, H, W); ``weight`` is (K, C / groups, R, S);
``bias`` is None or (K,). ``stride``, ``dilation`` and ``padding`` are ints or pairs (or
sequences of one); ``padding`` may also be ``"valid"`` (none) or ``"same"`` (stride 1 only;
an odd total is padded one more at the bottom / right, as torch does). The result has the input's dtype,
its batching, and its memory format: a channels-last input (an NCHW-shaped array with NHWC
strides) gives a channels-last output.

The convolution is the GEMM :func:`conv_geometry` describes: M = N * P * Q output pixels,
N = K / groups output channels, K = C / groups * R * S, one batch entry per group
(:meth:`ConvGeometry.problem` is what the scheduler plans). On the CPU (NumPy arrays) it
runs as BLAS products over chunks of the input (:mod:`.conv2d_cpu`); float16 is computed
in float32. CuPy arrays and CUDA torch tensors run on the GPU (:mod:`.conv2d_gpu`): the
same GEMM under the Stream-K scheduler, its A gathered from the input inside the kernels'
load stage, as a plan made once for each layout of the arrays says (:mod:`.conv_plan`;
:func:`skcontract.explain_conv2d` prints it). Other arrays with ``__dlpack__`` are viewed
as NumPy (CPU) or CuPy (CUDA) arrays without a copy, and the result is of that type.

Bad arguments raise before any work: TypeError for types and dtypes, ValueError naming
the dimension or argument for shapes, strides, padding, dilation and groups. torch tensors
mix with torch tensors only, as in ``torch.nn.functional.conv2d``: a NumPy weight or bias
beside a torch input (or the other way round) is a TypeError naming it.

The GPU schedule options (``mode``, ``reduction``, ``tile``, ``grid``) are checked on every
machine: on the CPU, where they choose nothing, an option the GPU would refuse for this
convolution, dtype and layout (on the H200 and H100 presets) raises the GPU's error; a
valid one is ignored there.

>>> import numpy as np
>>> x = np.arange(16.0).reshape(1, 1, 4, 4)
>>> w = np.ones((1, 1, 2, 2))
>>> conv2d(x, w)[0, 0]
array([[10., 14., 18.],
       [26., 30., 34.],
       [42., 46., 50.]])
>>> conv2d(x, w, padding="same").shape
(1, 1, 4, 4)
>>> conv2d(x, np.ones((1, 2, 2, 2)))
Traceback (most recent call last):
...
ValueError: conv2d: weight of shape (1, 2, 2, 2) with groups=1 expects 2 input channels, but the input has 1 (input shape (1, 1, 4, 4))
"""
from __future__ import annotations

import functools
from contextlib import nullcontext
from typing import NamedTuple

import numpy as np

from ..backends.numpy_backend import quietly
from ..interop import is_torch
from ..kernels import torch_cuda
from ..kernels.resolve import DEFAULT_REDUCTION
from ..schedule import GemmProblem
from ..schedule.device import DEVICE_NAMES, DeviceInfo
from ..schedule.types import AUTO, as_mode, as_reduction
from ..host.depthwise import channels_contiguous
from .conv2d_cpu import conv2d_cpu
from .conv_cpu_plan import plan_conv2d_cpu
from .conv2d_gpu import conv2d_gpu, warm_conv2d
from .conv_plan import ConvOperands, dense_nhwc, plan_conv2d

__all__ = ["conv2d", "conv_geometry", "ConvGeometry", "check_schedule_options"]

GPU_DTYPES = ("float16", "bfloat16", "float32", "float64")
"""The dtypes the GPU kernels convolve (complex runs on the CPU)."""
GEOMETRY_CACHE = 1024
"""Checked geometries remembered for warm calls (a network has a few dozen layers)."""


class ConvGeometry(NamedTuple):
    """A checked convolution: sizes, per-side padding (top, bottom, left, right), and the
    output's spatial size P x Q."""

    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    groups: int
    stride: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int, int, int]
    p: int
    q: int

    def problem(self, dtype: str = "float16", channel_block: int = 1) -> GemmProblem:
        """The implicit GEMM the scheduler plans: (N*P*Q) x (K/groups) x (C/groups*R*S),
        one batch entry per group; ``channel_block``: each tap's channels padded to whole
        blocks of it (the TMA convolution entry's k-tiles, one tap's block each).

        >>> conv_geometry((1, 512, 7, 7), (512, 512, 3, 3), padding=1).problem()
        GemmProblem(m=49, n=512, k=4608, batch=1, dtype='float16', groups=None)
        >>> conv_geometry((1, 3, 9, 9), (8, 3, 3, 3)).problem(channel_block=64).k
        576
        """
        cg = -(-(self.c // self.groups) // channel_block) * channel_block
        return GemmProblem(max(self.n * self.p * self.q, 1), self.k // self.groups,
                           max(cg * self.r * self.s, 1),
                           batch=self.groups, dtype=dtype)


def _pair(value, name: str, minimum: int) -> tuple[int, int]:
    """An int, or one or two ints (one is used for both dimensions, as torch does), as a
    pair, each at least ``minimum``."""
    vals = (value, value) if isinstance(value, (int, np.integer)) else value
    try:
        vals = tuple(vals)
    except TypeError:
        raise TypeError(f"conv2d: {name} must be an int or a pair of ints, got "
                        f"{type(value).__name__}") from None
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in vals):
        raise TypeError(f"conv2d: {name} must be an int or a pair of ints, got {value!r}")
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) != 2:
        raise ValueError(f"conv2d: {name} must be one int or two, got {len(vals)}: "
                         f"{value!r}")
    if min(vals) < minimum:
        what = "positive" if minimum == 1 else "non-negative"
        raise ValueError(f"conv2d: {name} must be {what}, got {value!r}")
    return int(vals[0]), int(vals[1])


def _padding(padding, stride, dilation, r, s) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) for an int, a pair, "valid" or "same"."""
    if isinstance(padding, str):
        if padding == "valid":
            return 0, 0, 0, 0
        if padding == "same":
            if stride != (1, 1):
                raise ValueError(f"conv2d: padding='same' needs stride 1, got stride "
                                 f"{stride}")
            th, tw = dilation[0] * (r - 1), dilation[1] * (s - 1)
            return th // 2, th - th // 2, tw // 2, tw - tw // 2
        raise ValueError(f"conv2d: padding must be 'valid', 'same', an int or a pair, got "
                         f"{padding!r}")
    ph, pw = _pair(padding, "padding", 0)
    return ph, ph, pw, pw


def conv_geometry(input_shape, weight_shape, stride=1, padding=0, dilation=1,
                  groups=1) -> ConvGeometry:
    """Check a convolution's shapes and arguments (torch's rules) and size its output.

    ``input_shape`` is (N, C, H, W) or (C, H, W); ``weight_shape`` (K, C / groups, R, S).

    >>> g = conv_geometry((32, 64, 56, 56), (64, 64, 3, 3), padding=1)
    >>> (g.p, g.q), g.problem().m
    ((56, 56), 100352)
    """
    input_shape, weight_shape = tuple(input_shape), tuple(weight_shape)
    if len(input_shape) not in (3, 4):
        raise ValueError(f"conv2d: input must be 3-D (C, H, W) or 4-D (N, C, H, W), got "
                         f"shape {input_shape}")
    if len(weight_shape) != 4:
        raise ValueError(f"conv2d: weight must be 4-D (out_channels, in_channels / groups, "
                         f"kH, kW), got shape {weight_shape}")
    n, c, h, w = (1,) + input_shape if len(input_shape) == 3 else input_shape
    k, cg, r, s = weight_shape
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)):
        raise TypeError(f"conv2d: groups must be an int, got {groups!r}")
    if groups < 1:
        raise ValueError(f"conv2d: groups must be positive, got {groups}")
    if k < groups:
        raise ValueError(f"conv2d: out_channels ({k}, weight shape {weight_shape}) must be "
                         f"at least groups={groups}")
    if k % groups:
        raise ValueError(f"conv2d: out_channels ({k}, weight shape {weight_shape}) must be "
                         f"divisible by groups={groups}")
    if cg * groups != c:
        raise ValueError(f"conv2d: weight of shape {weight_shape} with groups={groups} "
                         f"expects {cg * groups} input channels, but the input has {c} "
                         f"(input shape {input_shape})")
    if min(r, s) < 1:
        raise ValueError(f"conv2d: kernel size must be positive, got {r} x {s} (weight "
                         f"shape {weight_shape})")
    if min(h, w) < 1 and n * c > 0:  # (torch: only an empty batch or no channels)
        raise ValueError(f"conv2d: input height and width must be positive, got {h} x {w} "
                         f"(input shape {input_shape})")
    stride_ = _pair(stride, "stride", 1)
    dilation_ = _pair(dilation, "dilation", 1)
    pad = _padding(padding, stride_, dilation_, r, s)
    hp, wp = h + pad[0] + pad[1], w + pad[2] + pad[3]
    eh, ew = dilation_[0] * (r - 1) + 1, dilation_[1] * (s - 1) + 1
    if eh > hp or ew > wp:
        raise ValueError(f"conv2d: the dilated kernel ({eh} x {ew}) is larger than the "
                         f"padded input ({hp} x {wp}; input shape {input_shape})")
    p, q = (hp - eh) // stride_[0] + 1, (wp - ew) // stride_[1] + 1
    return ConvGeometry(n, c, h, w, k, r, s, int(groups), stride_, dilation_, pad, p, q)


@functools.lru_cache(maxsize=GEOMETRY_CACHE)
def _cached_geometry(*args) -> ConvGeometry:
    return conv_geometry(*args)


def _plain(value) -> bool:
    """An int, a string, or a tuple of ints, exactly: arguments whose equal values mean the
    same call (1.0 == 1 and True == 1 hash alike but are refused)."""
    kind = type(value)
    return kind is int or kind is str or (kind is tuple and all(type(v) is int for v in value))


def _geometry(*args) -> ConvGeometry:
    """conv_geometry, remembered for plain arguments (a warm call checks nothing twice)."""
    if all(_plain(a) for a in args):
        return _cached_geometry(*args)
    return conv_geometry(*args)


DLPACK_CPU = 1
DLPACK_CUDA_DEVICES = (2, 13)
"""DLPack device types read here: kDLCPU; kDLCUDA and kDLCUDAManaged."""


def _as_array(a):
    """Any other array with ``__dlpack__`` as a NumPy (CPU) or CuPy (CUDA) view of it, no
    copy; NumPy, CuPy and torch arrays, and everything else, as they are."""
    if isinstance(a, np.ndarray) or is_torch(a) or type(a).__module__.startswith("cupy") or \
            not hasattr(a, "__dlpack__") or not hasattr(a, "__dlpack_device__"):
        return a
    kind = a.__dlpack_device__()[0]
    if kind == DLPACK_CPU:
        return np.from_dlpack(a)
    if kind in DLPACK_CUDA_DEVICES:
        import cupy  # optional dependency: only the GPU path needs CuPy
        return cupy.from_dlpack(a)
    return a


def _where(a) -> str:
    """"cpu" for NumPy arrays and CPU torch tensors, "gpu" for CuPy arrays and CUDA arrays
    (``__cuda_array_interface__``, CUDA torch tensors); TypeError for anything else."""
    if isinstance(a, np.ndarray):
        return "cpu"
    if is_torch(a):
        return "gpu" if a.is_cuda else "cpu"
    module = type(a).__module__
    if module.startswith("cupy") or hasattr(a, "__cuda_array_interface__"):
        return "gpu"
    raise TypeError(f"conv2d: expected a NumPy, CuPy or torch array, got {type(a).__name__}")


def _check_arrays(input, weight, bias) -> str:
    """Where the call runs ("cpu" or "gpu"); TypeError for arrays of mixed kinds or dtypes,
    or a dtype that does not convolve there."""
    arrays = [("input", input), ("weight", weight)] + ([("bias", bias)] if bias is not None
                                                       else [])
    places = {name: _where(a) for name, a in arrays}
    tensors = [name for name, a in arrays if is_torch(a)]
    if tensors and len(tensors) < len(arrays):  # as torch.nn.functional.conv2d refuses
        name, a = next((name, a) for name, a in arrays if name not in tensors)
        raise TypeError(f"conv2d: {name} must be a torch tensor as {tensors[0]} is, got "
                        f"{_kind(a)} (torch tensors mix with torch tensors only, as in "
                        "torch.nn.functional.conv2d: convert it with torch.as_tensor)")
    if len(set(places.values())) > 1:
        raise TypeError("conv2d: arrays on the CPU and the GPU mixed (" + ", ".join(
            f"{name} {type(a).__name__} on the {places[name].upper()}" for name, a in arrays)
            + ")")
    dt = _dtype_name(input)
    if dt[:5] not in ("float", "compl") and dt != "bfloat16":
        raise TypeError(f"conv2d: input dtype {dt} is not a floating or complex type")
    for name, a in arrays[1:]:
        if _dtype_name(a) != dt:
            raise TypeError(f"conv2d: {name} dtype {_dtype_name(a)} differs from the input's "
                            f"{dt}")
    where = places["input"]
    if where == "gpu" and dt not in GPU_DTYPES:
        raise TypeError(f"conv2d: the GPU kernels take {', '.join(GPU_DTYPES)}, not {dt} "
                        "(complex convolutions run on the CPU)")
    return where


def _dtype_name(a) -> str:
    """The dtype's name, whatever its byte order (a NumPy '>f8' is float64)."""
    dt = a.dtype
    if isinstance(dt, np.dtype):
        dt = dt.newbyteorder("=")
    return str(dt).removeprefix("torch.")


def _kind(a) -> str:
    """An array's type as its module names it ("numpy.ndarray", "torch.Tensor")."""
    kind = type(a)
    return f"{kind.__module__.split('.')[0]}.{kind.__name__}"


BRIEF_CHARS = 80
"""The most characters of a value an error message quotes."""


def _brief(value) -> str:
    """A value as an error message quotes it: an array by its type and shape (never its
    contents), anything else by its repr, cut to :data:`BRIEF_CHARS`."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{_kind(value)} of shape {tuple(value.shape)}"
    text = repr(value)
    return text if len(text) <= BRIEF_CHARS else text[:BRIEF_CHARS - 3] + "..."


TILE_ENTRIES = (2, 5)
"""How many ints a forced tile has: (BM, BN), (BM, BN, BK), then CTAs an SM and CTAs a work
unit (:func:`skcontract.kernels.resolve.resolve_gemm`)."""


def check_schedule_options(mode, reduction, tile, grid) -> tuple | None:
    """conv2d's GPU schedule options checked as values, on any machine: ``mode`` one of the
    scheduler's modes or "auto", ``reduction`` one of its reductions, ``tile`` None or
    :data:`TILE_ENTRIES` non-negative ints, ``grid`` None or a positive int. TypeError for
    a type, ValueError for a value, each naming the option; returns ``tile`` as a tuple of
    ints (None for None). Whether a kernel runs them is the GPU plan's question
    (:func:`_gpu_refusal`)."""
    for name, value, check in (("mode", mode, as_mode), ("reduction", reduction,
                                                          as_reduction)):
        if not isinstance(value, str):
            raise TypeError(f"conv2d: {name} must be a string, got {_brief(value)}")
        check(value if len(value) <= BRIEF_CHARS else value[:BRIEF_CHARS] + "...")
    if tile is not None:
        if isinstance(tile, str) or hasattr(tile, "dtype"):
            raise TypeError(f"conv2d: tile must be a tuple of ints, got {_brief(tile)}")
        try:
            values = tuple(tile)
        except TypeError:
            raise TypeError(f"conv2d: tile must be a tuple of ints, got "
                            f"{type(tile).__name__}") from None
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                   for v in values):
            raise TypeError(f"conv2d: tile must be a tuple of ints, got {_brief(tile)}")
        if any(v < 0 for v in values):
            raise ValueError(f"conv2d: tile must not be negative, got {_brief(tile)}")
        if not TILE_ENTRIES[0] <= len(values) <= TILE_ENTRIES[1]:
            raise ValueError(f"conv2d: tile must have {TILE_ENTRIES[0]} to "
                             f"{TILE_ENTRIES[1]} entries, got {_brief(tile)}")
        tile = tuple(int(v) for v in values)
    if grid is not None:
        whole = isinstance(grid, (int, np.integer)) and not isinstance(grid, bool)
        if not whole or grid < 1:
            raise (ValueError if whole else TypeError)(
                f"conv2d: grid must be a positive int, got {_brief(grid)}")
    return tile


GPU_PRESETS = tuple(name for name in DEVICE_NAMES if name != "gpu")
"""The GPUs the CPU checks schedule options against (:func:`_gpu_refusal`)."""
STAND_INS = {"complex64": ("float32",), "complex128": ("float64",)}
"""The GPU dtypes a CPU-only dtype's options are checked for first (then every one)."""


def _check_on_gpus(g, dtype: str, input, bias: bool, mode, reduction, tile, grid) -> None:
    """On the CPU: the error the GPU would raise for these schedule options (checked by
    :func:`check_schedule_options`), if every preset refuses them (:func:`_gpu_refusal`)."""
    refusal = _gpu_refusal(g, dtype, _lies_channels_last(input), bias, mode, reduction,
                           tile, None if grid is None else int(grid))
    if refusal is not None:
        raise refusal[0](refusal[1])


@functools.lru_cache(maxsize=GEOMETRY_CACHE)
def _gpu_refusal(g, dtype: str, channels_last: bool, bias: bool, mode, reduction, tile,
                 grid) -> tuple[type, str] | None:
    """None where a GPU plans convolution ``g`` of dense ``dtype`` arrays (NCHW, or
    channels-last) with these options on one of :data:`GPU_PRESETS`; else the type and
    message of the first refusal (the error ``conv2d`` raises there). A dtype no GPU kernel
    takes (complex) is tried as each that one does, :data:`STAND_INS` first."""
    if dtype in GPU_DTYPES:
        dtypes = (dtype,)
    else:
        first = STAND_INS.get(dtype, ())
        dtypes = first + tuple(d for d in GPU_DTYPES if d not in first)
    operands = ConvOperands.dense(g, channels_last, bias)
    refusal = None
    for dt in dtypes:
        for name in GPU_PRESETS:
            try:
                plan_conv2d(g, dt, DeviceInfo.named(name), operands, mode=mode,
                            reduction=reduction, tile=tile, grid=grid)
                return None
            except (ValueError, TypeError) as e:
                refusal = refusal or (type(e), str(e))
    return refusal


def _lies_channels_last(a) -> bool:
    """Whether a CPU array (NumPy, or a torch tensor) is dense channels-last, as the GPU
    path reads its layout (:func:`.conv_plan.dense_nhwc`)."""
    shape = tuple(a.shape)
    strides = tuple(a.stride()) if is_torch(a) else \
        tuple(st // max(a.itemsize, 1) for st in a.strides)
    if len(shape) == 3:  # unbatched: one image
        shape, strides = (1,) + shape, (0,) + strides
    return dense_nhwc(shape, strides)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *,
           mode="auto", reduction="deterministic", tile=None, grid=None):
    """A 2-D convolution with torch.nn.functional.conv2d's semantics (see the module).

    ``mode``, ``reduction``, ``tile`` and ``grid`` choose the GPU schedule as for
    :func:`skcontract.kernels.gemm.gemm`. The CPU checks them as the GPU would (an option
    no GPU plan takes for this convolution raises the GPU's error) and then ignores them."""
    args = (stride, padding, dilation, groups, mode, reduction, tile, grid)
    plain = all(_plain(a) for a in args[:4]) and (tile is None or _plain(tile)) and \
        (grid is None or _plain(grid)) and type(mode) is str and type(reduction) is str
    if plain:
        hit = warm_conv2d(input, weight, bias, args)
        if hit is not None:
            return hit
    input, weight = _as_array(input), _as_array(weight)
    bias = None if bias is None else _as_array(bias)
    where = _check_arrays(input, weight, bias)
    g = _geometry(tuple(input.shape), tuple(weight.shape), stride, padding, dilation, groups)
    if bias is not None and tuple(bias.shape) != (g.k,):
        raise ValueError(f"conv2d: bias must have shape ({g.k},) for weight of shape "
                         f"{tuple(weight.shape)}, got {tuple(bias.shape)}")
    defaults = type(mode) is str and type(reduction) is str and mode == AUTO and \
        reduction == DEFAULT_REDUCTION and tile is None and grid is None
    if not defaults:
        tile = check_schedule_options(mode, reduction, tile, grid)
    if where == "gpu":
        torch_device = torch_cuda.device_of(input)
        with nullcontext() if torch_device is None else \
                torch_cuda.on_torch_stream(torch_device):
            return conv2d_gpu(input, weight, bias, g, mode=mode, reduction=reduction,
                              tile=tile, grid=grid, warm_args=args if plain else None)
    if not defaults:
        _check_on_gpus(g, _dtype_name(input), input, bias is not None, mode, reduction, tile,
                       grid)
    if is_torch(input):
        return _on_torch_cpu(input, weight, bias, g)
    return _conv2d_cpu(input, weight, bias, g)


def _on_torch_cpu(input, weight, bias, g):
    """CPU torch tensors: computed on NumPy views (bfloat16 in float32), returned as torch."""
    import torch  # optional dependency: only torch callers reach this

    def view(t):
        t = t.detach().resolve_conj().resolve_neg()  # NumPy views have no such bits
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()

    out = _conv2d_cpu(view(input), view(weight), None if bias is None else view(bias), g)
    return torch.from_numpy(out).to(input.dtype)


@quietly
def _conv2d_cpu(input, weight, bias, g):
    """The convolution on NumPy arrays, with floating-point errors (an overflow, an inf
    times zero) neither warned of nor raised, as torch's conv2d computes."""
    batched = input.ndim == 4
    x = input if batched else input[None]
    native = input.dtype.newbyteorder("=")  # the result in native byte order
    compute = np.float32 if native == np.float16 else native
    x = x.astype(compute, copy=False)
    plan = plan_conv2d_cpu(g, compute, channels_contiguous(x))
    out = conv2d_cpu(x, weight.astype(compute, copy=False), g, plan)
    if bias is not None:
        out += bias.astype(compute, copy=False)[None, :, None, None]
    out = out.astype(native, copy=False)
    if _channels_last(x):
        out = np.ascontiguousarray(out.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    else:
        out = np.ascontiguousarray(out)
    return out if batched else out[0]


def _channels_last(x: np.ndarray) -> bool:
    """A dense NHWC layout (C fastest) that is not also dense NCHW (arrays whose H and W are
    1 are both, and stay NCHW)."""
    return x.transpose(0, 2, 3, 1).flags.c_contiguous and not x.flags.c_contiguous
