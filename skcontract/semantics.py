"""numpy.einsum's rules around a contraction: the arguments (order, casting, conj, shapes),
the result dtype, the operands' casts, ``out``, and the single operand's view and broadcast
axes that numpy returns or reads without a contraction."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .backends.numpy_backend import quietly
from .dtypes import EXACT
from .kernels.catalogue import PRECISIONS
from .parse import parse_equation, split_operands, symbol

_ORDERS = ("C", "F", "A", "K")
_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


def checked_order_casting(order: Any, casting: Any) -> str:
    """``order`` as one of 'C', 'F', 'A', 'K' (numpy's spellings: either case, bytes, None
    for 'K'); ValueError for another order or casting rule."""
    name = "K" if order is None else order
    if isinstance(name, bytes):
        name = name.decode("latin-1")
    if isinstance(name, str):
        name = name.upper()
    if name not in _ORDERS:
        raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
    if casting not in _CASTINGS:
        raise ValueError("casting must be one of 'no', 'equiv', 'safe', 'same_kind', or "
                         f"'unsafe' (got {casting!r})")
    return name


def check_precision(precision: Any) -> None:
    if precision is not None and precision != EXACT and precision not in PRECISIONS:
        raise ValueError(f"precision must be None (float32 accuracy), {EXACT!r} or one of "
                         f"{', '.join(map(repr, PRECISIONS))} (got {precision!r})")


def conj_indices(conj: Any, n: int) -> tuple[int, ...]:
    """``conj`` (einsum's: positions of operands read conjugated) as a sorted tuple of
    positions in ``range(n)`` (a negative one counts from the end); TypeError for anything
    but integers, ValueError for a position out of range or named twice."""
    if conj is None or (type(conj) is tuple and not conj):  # (every call's default)
        return ()
    if isinstance(conj, (str, bytes)) or not hasattr(conj, "__iter__"):
        raise TypeError(f"conj must be a sequence of operand positions, got "
                        f"{type(conj).__name__} {conj!r}")
    out = []
    for i in conj:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"conj: operand positions are integers, got "
                            f"{type(i).__name__} {i!r}")
        if not -n <= i < n:
            raise ValueError(f"conj: operand position {i} is out of range for {n} "
                             f"operand(s)")
        out.append(int(i) % n)
    if len(set(out)) != len(out):
        raise ValueError(f"conj: an operand is named twice in {tuple(conj)!r}")
    return tuple(sorted(out))


def complex_conj(conj: tuple[int, ...], arrays) -> tuple[int, ...]:
    """The positions of ``conj`` whose operands are complex (a real one's conjugate is
    itself)."""
    return tuple([i for i in conj if np.dtype(arrays[i].dtype).kind == "c"])


def check_numeric(dt: np.dtype, what: str) -> None:
    if dt.kind not in "biufcO":
        raise TypeError(f"einsum does not support the dtype {dt} ({what})")


def result_dtype(arrays: Sequence[Any], dtype: Any, casting: str) -> np.dtype:
    """numpy's rule: result_type of the operands, or ``dtype`` (each operand castable);
    remembered per (operand dtypes, dtype, casting), as every call asks."""
    key = (tuple([a.dtype for a in arrays]), dtype, casting)
    try:
        return _RESULT_DTYPES[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable dtype= argument
        return _result_dtype_of(arrays, dtype, casting)
    if len(_RESULT_DTYPES) >= _RESULT_DTYPES_MAX:
        _RESULT_DTYPES.clear()
    res = _RESULT_DTYPES[key] = _result_dtype_of(arrays, dtype, casting)
    return res


_RESULT_DTYPES: dict = {}


_RESULT_DTYPES_MAX = 4096


def _result_dtype_of(arrays: Sequence[Any], dtype: Any, casting: str) -> np.dtype:
    """The result dtype; every operand must cast to it by ``casting`` (which the operands'
    common type fails only under 'no' and 'equiv')."""
    if dtype is None:
        res = np.result_type(*[a.dtype for a in arrays])
        check_numeric(res, "the operands' common type")
        what = "their common type"
    else:
        res = np.dtype(dtype)
        check_numeric(res, "dtype=")
        what = "dtype="
    _check_operand_casts(arrays, res, casting, what)
    return res


def _check_operand_casts(arrays: Sequence[Any], res: np.dtype, casting: str, what: str):
    """TypeError naming the first operand that does not cast to ``res`` (``what``) by
    ``casting``."""
    for i, a in enumerate(arrays):
        if not np.can_cast(a.dtype, res, casting):
            raise TypeError(f"Cannot cast operand {i} from {a.dtype!r} to {res!r} ({what}) "
                            f"according to the rule {casting!r}")


def widened_by_out(arrays: Sequence[Any], res: np.dtype, out_dtype, casting: str):
    """The dtype numpy computes in with ``out`` and no ``dtype=``: the operands' and out's
    common type (a wider out widens the sums: int8 sums into an int64 out do not wrap at
    8 bits), each operand castable to it by ``casting``."""
    wide = np.result_type(res, out_dtype)
    if wide != res:
        _check_operand_casts(arrays, wide, casting, "the operands' and out's common type")
    return wide


@quietly
def cast(a, dtype):
    """``a.astype(dtype)`` as numpy.einsum casts: an overflow to inf or a NaN to an integer
    neither warns nor raises."""
    return a.astype(dtype)


def caster(casting: str):
    """How a call casts its operands to the compute dtype: plainly where ``casting`` allows
    safe casts only (none overflows), else :func:`cast`."""
    return _astype if casting in _SAFE_CASTINGS else cast


def _astype(a, dtype):
    return a.astype(dtype)


_SAFE_CASTINGS = ("no", "equiv", "safe")


@quietly
def _copy_into(out, result, xp) -> None:
    """``result`` written into ``out`` whatever the cast, as numpy.einsum writes it (no
    floating-point warning)."""
    xp.copyto(out, result, casting="unsafe")


def finish(result, arrays, res_dtype, allocates, out, order, casting, xp):
    if result.dtype != res_dtype:
        result = cast(result, res_dtype)
    elif not allocates:
        result = result.copy()
    if out is not None:
        _copy_into(out, result, xp)
        return out
    if result.ndim < 2:  # C and F orders coincide
        pass
    elif order == "C":
        result = xp.ascontiguousarray(result)
    elif order == "F":
        result = xp.asfortranarray(result)
    elif order == "A":
        f = all(a.flags.f_contiguous for a in arrays) and \
            not all(a.flags.c_contiguous for a in arrays)
        result = xp.asfortranarray(result) if f else xp.ascontiguousarray(result)
    return result[()] if result.ndim == 0 else result


def check_out(out, bk, shape, res_dtype, casting) -> None:
    if not bk.is_array(out):
        raise TypeError(f"keyword parameter out must be an array for einsum (got "
                        f"{type(out).__name__})")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"out has shape {tuple(out.shape)}, but the einsum result has shape "
                         f"{tuple(shape)}")
    if not np.can_cast(res_dtype, out.dtype, casting):
        raise TypeError(f"Cannot cast the einsum result from {res_dtype!r} to out's "
                        f"{out.dtype!r} according to the rule {casting!r}")
    if not np.can_cast(out.dtype, res_dtype, casting):  # numpy reads out in that type too
        raise TypeError(f"Cannot cast out's {out.dtype!r} to the einsum's {res_dtype!r} "
                        f"according to the rule {casting!r}")


def view_call(shape, strides, xp):
    """The warm call of a single operand's view (:func:`single_operand_view`)."""
    return lambda arrays: strided_view(arrays[0], shape, strides, xp)


def strided_view(a, shape, strides, xp):
    """``a``'s elements at ``shape`` and ``strides`` from its first, as ``as_strided`` makes
    them. A contiguous NumPy array lends its buffer to an ndarray directly, a quarter of
    ``as_strided``'s cost (which wraps ``a`` in an array interface first); the view is
    writeable where ``a`` is, and its base is ``a``."""
    if xp is np and (a.flags.c_contiguous or a.flags.f_contiguous):
        return np.ndarray(shape, a.dtype, buffer=a, strides=strides)
    return xp.lib.stride_tricks.as_strided(a, shape, strides)


def viewable(operand_dtype, res) -> bool:
    """Whether a single operand's result may be a view of it: its dtype is the result's up
    to byte order (numpy.einsum's view keeps the operand's byte order). Another dtype makes
    a copy in that dtype (where numpy.einsum would return the view, ignoring ``dtype``)."""
    return operand_dtype == res or operand_dtype.newbyteorder("=") == res.newbyteorder("=")


def has_order(a, order) -> bool:
    """Whether ``a`` is laid out as ``order`` asks ('K' and 'A' take any layout)."""
    return order in ("K", "A") or (a.flags.c_contiguous if order == "C" else
                                   a.flags.f_contiguous)


def single_operand_view(eq, a, xp):
    """numpy.einsum's view of one operand that it only transposes or takes diagonals of
    (every label kept, no sum): the output's strides are the sums of its labels' strides.
    None when a label is summed, and for a 0-d result, which numpy returns as a scalar. A
    read-only operand (a broadcast one) gives a read-only view, as in numpy."""
    (labels,) = eq.inputs
    if not eq.output or set(labels) != set(eq.output):
        return None
    strides = {lab: 0 for lab in eq.output}
    for lab, st in zip(labels, a.strides):
        strides[lab] += st
    return strided_view(a, tuple(eq.sizes[x] for x in eq.output),
                         tuple(strides[x] for x in eq.output), xp)


def broadcast_axes(a) -> list[int]:
    """Axes along which ``a`` repeats itself (stride 0, more than one element); none in an
    empty array (NumPy gives its axes stride 0 whatever their length)."""
    if a.size == 0:
        return []
    return [ax for ax, (n, st) in enumerate(zip(a.shape, a.strides)) if st == 0 and n > 1]


def without_broadcast_axes(subscripts, arrays):
    """The same contraction with every broadcast axis read once instead of materialised or
    swept: ``(subscripts, arrays, expand)`` where ``expand(result, order)`` broadcasts the
    smaller result back to the full output; None when nothing can be dropped.

    An axis repeats its operand when its stride is 0 (np.broadcast_to) or its length is 1
    while the label's size is larger (einsum's own broadcasting). Its label is dropped from
    that operand when another operand spans it in full (the products do not depend on it)
    or when it is an output label, which the result then gets back by broadcasting."""
    eq = parse_equation(subscripts, [a.shape for a in arrays])
    labels = list(dict.fromkeys([x for t in eq.inputs for x in t] + list(eq.output)))

    strided = [broadcast_axes(a) for a in arrays]

    def repeats(i, ax):
        return ax in strided[i] or (arrays[i].shape[ax] == 1 and eq.sizes[eq.inputs[i][ax]] > 1)

    full = [{lab for ax, lab in enumerate(t) if not repeats(i, ax)}
            for i, t in enumerate(eq.inputs)]
    terms, small = [], []
    kept = set()   # labels kept at their full size (on an axis that does not repeat)
    swept = set()  # labels kept on a repeating axis longer than 1 (a broadcast diagonal)
    for i, (t, a) in enumerate(zip(eq.inputs, arrays)):
        index, keep = [slice(None)] * a.ndim, []
        for ax, lab in enumerate(t):
            spanned = any(lab in full[j] for j in range(len(arrays)) if j != i)
            if repeats(i, ax) and t.count(lab) == 1 and (spanned or lab in eq.output):
                index[ax] = 0
                continue
            keep.append(lab)
            if not repeats(i, ax):
                kept.add(lab)
            elif a.shape[ax] > 1:
                swept.add(lab)
        terms.append(keep)
        small.append(a[tuple(index)] if len(keep) != len(t) else a)
    if all(s is a for s, a in zip(small, arrays)) or swept - kept:
        # (a label kept only on broadcast axes longer than 1 would be summed over them)
        return None
    # A label left only on axes of length 1 has length 1 in the smaller contraction: it is
    # summed there (over one term) and broadcast back where the output has it.
    letter = {x: symbol(i) for i, x in enumerate(labels)}
    out_small = [x for x in eq.output if x in kept]
    sub = ",".join("".join(letter[x] for x in t) for t in terms) + "->" + \
        "".join(letter[x] for x in out_small)
    full_shape = tuple(eq.sizes[x] for x in eq.output)
    where = [ax for ax, x in enumerate(eq.output) if x not in kept]

    def expand(r, order):
        if not where:
            return r
        r = np.broadcast_to(np.expand_dims(r, where), full_shape)
        return np.array(r, order="F" if order == "F" else "C")
    return sub, small, expand


def shapes_and_dtype(subscripts, operands_or_shapes, shapes: bool, dtype):
    if not isinstance(subscripts, str):
        subscripts, ops = split_operands((subscripts, *operands_or_shapes))
    else:
        ops = list(operands_or_shapes)
    if shapes:
        shp = tuple(operand_shape(s, i) for i, s in enumerate(ops))
        res = np.dtype(dtype if dtype is not None else np.float64)
        check_numeric(res, "dtype=")
        return subscripts, shp, res
    arrays = [x if hasattr(x, "shape") and hasattr(x, "dtype") else np.asarray(x)
              for x in ops]
    res = np.dtype(dtype) if dtype is not None else np.result_type(*[a.dtype for a in arrays])
    return subscripts, tuple(tuple(a.shape) for a in arrays), res


def operand_shape(s, i: int) -> tuple[int, ...]:
    """Operand ``i``'s shape given as a sequence of non-negative ints (numpy's rules: no
    strings, no floats, no booleans). Errors name an array given instead by its shape and
    dtype, never by its contents."""
    if hasattr(s, "shape") and hasattr(s, "dtype"):
        raise TypeError(f"with shapes=True every operand must be a shape (a tuple of ints); "
                        f"operand {i} is an array of shape {tuple(s.shape)} and dtype "
                        f"{s.dtype} (pass its .shape, or the arrays to contract_path without "
                        "shapes=True)")
    if isinstance(s, (str, bytes)) or not hasattr(s, "__iter__"):
        raise TypeError(f"with shapes=True every operand must be a shape (a tuple of ints); "
                        f"operand {i} is {brief(s)}")
    if type(s) is tuple and _INT.issuperset(map(type, s)) and \
            0 <= min(s, default=0) and max(s, default=0) <= _INTP_MAX and \
            math.prod(s) <= _INTP_MAX:
        return s  # (a tuple of ints in range: the checks below would pass)
    dims = []
    for d in s:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"operand {i}'s shape {brief(tuple(s))} has a dimension "
                            f"{brief(d)} that is not an int")
        if d < 0:
            raise ValueError(f"operand {i}'s shape {brief(tuple(s))} has a negative dimension")
        if d > _INTP_MAX:
            raise ValueError(f"operand {i}'s shape {brief(tuple(s))} has a dimension above "
                             f"{_INTP_MAX}, the largest an array may have")
        dims.append(int(d))
    if math.prod(dims) > _INTP_MAX:
        raise ValueError(f"operand {i}'s shape {brief(tuple(s))} has more elements than an array "
                         f"may have ({_INTP_MAX})")
    return tuple(dims)


_INTP_MAX = int(np.iinfo(np.intp).max)


_INT = frozenset({int})


BRIEF_CHARS = 80
"""The most characters of a value an error message quotes."""


def brief(x) -> str:
    """``repr(x)``, cut to :data:`BRIEF_CHARS` (an error never prints a large value whole)."""
    text = repr(x)
    return text if len(text) <= BRIEF_CHARS else text[:BRIEF_CHARS - 3] + "..."


def looks_like_shapes(ops) -> bool:
    """Whether every operand is a tuple of ints: shapes given without ``shapes=True``."""
    return bool(ops) and all(
        isinstance(x, tuple) and all(isinstance(d, (int, np.integer))
                                     and not isinstance(d, bool) for d in x) for x in ops)
