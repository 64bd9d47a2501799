"""Parity of skcontract.einsum with numpy.einsum over random expressions.

Every case runs numpy.einsum (its default, optimize=False) on the same operands and
compares: the result type, dtype and shape exactly; integer and bool values exactly; float
and complex values against a float64/complex128 reference with a tolerance relative to the
sum of |products| (the reference computed on |operands|).

Parity cases executed: MAX_EXAMPLES (property test) + len(FIXED) + len(DTYPES) * len(
OPTIMIZE_NAMES) (the dtype x optimize grid); see ``test_case_count``.

One test body, two array modules: every test that takes the ``xp`` fixture builds its
operands with that module (NumPy here; ``tests/gpu/test_parity_gpu.py`` runs the same tests
with CuPy, where a result is a CuPy array, 0-d for numpy's scalars) and compares with
numpy.einsum on NumPy copies.
"""
from __future__ import annotations

import numpy as np
import opt_einsum
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skcontract.contract import contract_expression, einsum

MAX_EXAMPLES = 1200


@pytest.fixture(scope="module")
def xp():
    """The array module the operands live in (the GPU suite overrides it with CuPy)."""
    return np


def to_numpy(x):
    """A NumPy copy of an operand or result of either module (scalars stay as they are)."""
    return x.get() if hasattr(x, "get") and not isinstance(x, np.generic) else x


def numpy_type(xp, ref):
    """The type ``xp``'s einsum returns where numpy returns ``ref``: the same for NumPy;
    CuPy has no scalars, so its results are CuPy arrays (0-d for numpy's scalars)."""
    return type(ref) if xp is np else xp.ndarray

DTYPES = ["float16", "float32", "float64", "complex64", "complex128", "int8", "int16",
          "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"]
OPTIMIZE_NAMES = [False, True, "auto", "greedy", "optimal", "dp", "branch-2", "branch-all",
                  "random-greedy", "eager"]
OPTIMIZE_KINDS = OPTIMIZE_NAMES + ["PathOptimizer", "numpy-path", "oe-path"]
LABELS = "abcdeAB"
LAYOUTS = ["C", "C", "F", "strided", "reversed", "broadcast"]
RTOL = {"e": 4e-3, "f": 5e-5, "d": 1e-12, "F": 5e-5, "D": 1e-12}


def random_array(rng, shape, dtype, layout="C", xp=np):
    """Random non-zero values of ``dtype`` in ``shape``, laid out as ``layout``, in ``xp``
    (the values come from ``rng`` whatever the module)."""
    dt = np.dtype(dtype)
    if layout == "broadcast" and any(d > 1 for d in shape):
        ax = next(i for i, d in enumerate(shape) if d > 1)
        small = list(shape)
        small[ax] = 1
        return xp.broadcast_to(random_array(rng, tuple(small), dt, xp=xp), shape)
    if dt.kind == "f":
        a = rng.standard_normal(shape) + np.sign(rng.standard_normal(shape)) * 0.25
    elif dt.kind == "c":
        a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape) + 0.25
    elif dt.kind == "i":
        a = rng.choice(np.array([-3, -2, -1, 1, 2, 3]), size=shape)
    elif dt.kind == "u":
        a = rng.integers(1, 4, size=shape)
    else:
        a = rng.random(shape) < 0.6
    a = xp.asarray(np.asarray(a).astype(dt))
    if layout == "F" and a.ndim:
        return xp.asfortranarray(a)
    if layout == "strided" and a.ndim:
        big = a
        for ax in range(a.ndim):
            big = xp.repeat(big, 2, axis=ax)
        return big[(slice(None, None, 2),) * a.ndim]
    if layout == "reversed" and a.ndim:
        return xp.flip(xp.flip(a).copy())
    return a


def check_close(got, ref, subscripts, operands, xp=np):
    """Assert ``got`` equals numpy's ``ref`` as a value of the same type (``xp``'s, see
    :func:`numpy_type`), dtype and shape."""
    assert type(got) is numpy_type(xp, ref), (type(got), type(ref))
    operands = [to_numpy(o) for o in operands]
    got_a, ref_a = np.asarray(to_numpy(got)), np.asarray(ref)
    assert got_a.dtype == ref_a.dtype, (got_a.dtype, ref_a.dtype)
    assert got_a.shape == ref_a.shape
    dt = ref_a.dtype
    if dt.kind in "biuO":
        np.testing.assert_array_equal(got_a, ref_a)
        return
    wide = np.complex128 if dt.kind == "c" else np.float64
    exact = np.einsum(subscripts, *[np.asarray(o).astype(wide) for o in operands])
    bound = np.einsum(subscripts, *[np.abs(np.asarray(o).astype(wide)) for o in operands])
    err = np.abs(got_a.astype(wide) - exact)
    # the result's own rounding, plus the accumulation error relative to sum |products|
    tol = RTOL[dt.char] * (np.asarray(bound) + 1.0) + np.abs(exact) * np.finfo(dt).eps
    assert np.all(err <= tol), (subscripts, dt, float(np.max(err - tol)))


@st.composite
def einsum_cases(draw):
    """A random valid einsum: (subscripts, operands, sublist-args, optimize, seed)."""
    pool = draw(st.lists(st.sampled_from(LABELS), min_size=1, max_size=5, unique=True))
    sizes = {lab: draw(st.sampled_from([2, 3, 1, 4, 2, 3, 0])) for lab in pool}
    n_ops = draw(st.integers(1, 4))
    use_ell = draw(st.integers(0, 3)) == 0
    ell_shape = tuple(draw(st.lists(st.integers(1, 3), max_size=2))) if use_ell else ()
    dtype = draw(st.sampled_from(DTYPES))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    terms, shapes, layouts = [], [], []
    any_ell = False
    for _ in range(n_ops):
        labels = draw(st.lists(st.sampled_from(pool), max_size=3 if n_ops > 2 else 4))
        shape = [sizes[x] for x in labels]
        for i, lab in enumerate(labels):
            if labels.count(lab) == 1 and draw(st.integers(0, 5)) == 0:
                shape[i] = 1  # size-1 broadcasting of a named label
        term = "".join(labels)
        if use_ell and draw(st.booleans()):
            pos = draw(st.integers(0, len(labels)))
            ne = draw(st.integers(0, len(ell_shape)))
            eshape = [d if draw(st.integers(0, 3)) else 1 for d in ell_shape[len(ell_shape)
                                                                           - ne:]]
            term = term[:pos] + "..." + term[pos:]
            shape = shape[:pos] + eshape + shape[pos:]
            any_ell = True
        terms.append(term)
        shapes.append(tuple(shape))
        layouts.append(draw(st.sampled_from(LAYOUTS)))
    present = list(dict.fromkeys("".join(t.replace(".", "") for t in terms)))
    if draw(st.integers(0, 3)) == 0:
        output = None
    else:
        out_labels = draw(st.permutations(present))[:draw(st.integers(0, len(present)))]
        output = "".join(out_labels)
        if any_ell:
            pos = draw(st.integers(0, len(output)))
            output = output[:pos] + "..." + output[pos:]
    subscripts = ",".join(terms) + ("" if output is None else "->" + output)
    if draw(st.integers(0, 4)) == 0:
        subscripts = subscripts.replace(",", " , ").replace("->", " -> ")  # spaces ignored
    operands = [random_array(rng, s, dtype, lay) for s, lay in zip(shapes, layouts)]
    kind = draw(st.sampled_from(OPTIMIZE_KINDS))
    if kind == "PathOptimizer":
        optimize = opt_einsum.RandomGreedy(max_repeats=4)
    elif kind in ("numpy-path", "oe-path"):
        path, alive = [], n_ops
        while alive > 1:
            i, j = draw(st.lists(st.integers(0, alive - 1), min_size=2, max_size=2,
                                 unique=True))
            path.append((i, j))
            alive -= 1
        optimize = ["einsum_path", *path] if kind == "numpy-path" else path
    else:
        optimize = kind
    sublist = draw(st.integers(0, 4)) == 0
    return subscripts, operands, output, sublist, optimize


def to_sublist(subscripts, operands):
    """The interleaved form of an expression (letters -> ints, '...' -> Ellipsis)."""
    def conv(term):
        out, rest = [], term
        while rest:
            if rest.startswith("..."):
                out.append(Ellipsis)
                rest = rest[3:]
            else:
                out.append("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".index(rest[0]))
                rest = rest[1:]
        return out
    s = subscripts.replace(" ", "")
    lhs, _, rhs = s.partition("->")
    args = []
    for op, term in zip(operands, lhs.split(",")):
        args += [op, conv(term)]
    if "->" in s:
        args.append(conv(rhs))
    return args


@settings(max_examples=MAX_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(einsum_cases())
def test_parity_random(xp, case):
    subscripts, operands, _output, sublist, optimize = case
    ref = np.einsum(subscripts, *operands)
    operands = [same_layout(xp, o) for o in operands]
    if sublist:
        got = einsum(*to_sublist(subscripts, operands), optimize=optimize)
    else:
        got = einsum(subscripts, *operands, optimize=optimize)
    check_close(got, ref, subscripts, operands, xp)


def same_layout(xp, a):
    """``a`` (NumPy) in ``xp`` with the same strides: C, F, every-other-element, reversed
    and broadcast layouts are rebuilt as random_array builds them."""
    if xp is np:
        return a
    if any(st == 0 and n > 1 for n, st in zip(a.shape, a.strides)):
        small = a[tuple(slice(0, 1) if st == 0 else slice(None) for st in a.strides)]
        return xp.broadcast_to(same_layout(xp, np.ascontiguousarray(small)), a.shape)
    if a.ndim and any(st < 0 for st in a.strides):
        return xp.flip(xp.flip(xp.asarray(np.ascontiguousarray(a))).copy())
    if a.ndim and not a.flags.c_contiguous and not a.flags.f_contiguous:
        big = xp.asarray(np.ascontiguousarray(a))
        for ax in range(a.ndim):
            big = xp.repeat(big, 2, axis=ax)
        return big[(slice(None, None, 2),) * a.ndim]
    if a.ndim > 1 and a.flags.f_contiguous and not a.flags.c_contiguous:
        return xp.asfortranarray(xp.asarray(a))
    return xp.asarray(a)


FIXED = [
    ("ij,jk->ik", [(5, 6), (6, 7)]),
    ("ij,j->i", [(5, 6), (6,)]),
    ("bij,bjk->bik", [(3, 4, 5), (3, 5, 6)]),
    ("i,i->", [(7,), (7,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iii->i", [(3, 3, 3)]),
    ("ijji->ij", [(2, 3, 3, 2)]),
    ("ij->", [(3, 4)]),
    ("ij", [(3, 4)]),
    ("ji", [(3, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("i...->...", [(3, 2, 2)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ij,jk->ik", [(3, 1), (4, 5)]),
    ("ij,jk->ik", [(0, 4), (4, 5)]),
    ("ij,jk->ik", [(3, 0), (0, 5)]),
    (",->", [(), ()]),
    ("i,->i", [(3,), ()]),
    ("", [()]),
    ("abc,cd,de,ea->b", [(2, 3, 4), (4, 5), (5, 6), (6, 2)]),
    ("abcd,dcba->", [(2, 3, 4, 5), (5, 4, 3, 2)]),
    ("Ab,bA->Ab", [(2, 3), (3, 2)]),
    ("ijk,ikl,ilm->jm", [(2, 3, 4), (2, 4, 5), (2, 5, 3)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("i,i,i->i", [(4,), (4,), (4,)]),
    ("ij,ij,ij->", [(3, 4), (3, 4), (3, 4)]),
    ("...,...->...", [(2, 3), (3,)]),
]


@pytest.mark.parametrize("dtype", ["float16", "float64", "complex64", "int8", "uint32", "bool"])
@pytest.mark.parametrize("subscripts,shapes", FIXED)
def test_parity_fixed(xp, subscripts, shapes, dtype):
    rng = np.random.default_rng(7)
    ops = [random_array(rng, s, dtype, xp=xp) for s in shapes]
    ref = np.einsum(subscripts, *[to_numpy(o) for o in ops])
    check_close(einsum(subscripts, *ops), ref, subscripts, ops, xp)


@pytest.mark.parametrize("optimize", OPTIMIZE_NAMES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_parity_dtype_optimize_grid(xp, dtype, optimize):
    rng = np.random.default_rng(11)
    subscripts = "ab,bc,cd,da->ac"
    ops = [random_array(rng, s, dtype, lay, xp) for s, lay in
           zip([(3, 4), (4, 5), (5, 2), (2, 3)], ["C", "F", "strided", "broadcast"])]
    ref = np.einsum(subscripts, *[to_numpy(o) for o in ops])
    check_close(einsum(subscripts, *ops, optimize=optimize), ref, subscripts, ops, xp)


def test_float16_accumulates_in_float32(xp):
    x = xp.ones(5000, np.float16)
    assert float(einsum("i->", x)) == 5000
    assert float(einsum("i,i->", x, x)) == 5000
    assert float(einsum("ij,jk->ik", xp.ones((1, 5000), np.float16),
                        xp.ones((5000, 1), np.float16))[0, 0]) == 5000


def test_integer_overflow_wraps_like_numpy(xp):
    a = np.full((2, 2), 100, np.int8)
    assert int(einsum("ij,ij->", xp.asarray(a), xp.asarray(a))) == np.einsum("ij,ij->", a, a)


def test_bool_is_or_of_and(xp):
    a = np.array([[True, False], [True, True]])
    np.testing.assert_array_equal(to_numpy(einsum("ij,jk->ik", xp.asarray(a), xp.asarray(a))),
                                  np.einsum("ij,jk->ik", a, a))
    assert einsum("ij->", xp.asarray(a)).dtype == np.bool_


def test_object_dtype():
    a = np.arange(6).reshape(2, 3).astype(object)
    b = np.arange(12).reshape(3, 4).astype(object)
    np.testing.assert_array_equal(einsum("ij,jk->ik", a, b), np.einsum("ij,jk->ik", a, b))
    assert einsum("ii", np.eye(3, dtype=int).astype(object)) == 3


def test_python_scalars_and_lists():
    assert einsum("i,->i", np.arange(3, dtype=np.int8), 3).dtype == np.int64
    np.testing.assert_array_equal(einsum("ij->ji", [[1, 2], [3, 4]]), [[1, 3], [2, 4]])


def test_case_count():
    n = MAX_EXAMPLES + len(FIXED) * 6 + len(DTYPES) * len(OPTIMIZE_NAMES)
    assert n > 1000


# --- out=, dtype=, casting=, order= -------------------------------------------------------

def test_out_is_returned_and_filled(xp):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 6))
    out = xp.full((4, 6), np.nan)
    r = einsum("ij,jk->ik", xp.asarray(a), xp.asarray(b), out=out)
    assert r is out
    np.testing.assert_allclose(to_numpy(out), a @ b, rtol=1e-12)


def test_out_non_contiguous_and_0d(xp):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 6))
    xa, xb = xp.asarray(a), xp.asarray(b)
    out = xp.zeros((12, 6))[::3]  # a strided view
    assert not out.flags.c_contiguous
    assert einsum("ij,jk->ik", xa, xb, out=out) is out
    np.testing.assert_allclose(to_numpy(out), a @ b, rtol=1e-12)
    tgt = xp.zeros((6, 4)).T
    einsum("ij,jk->ik", xa, xb[:, :6], out=tgt)
    np.testing.assert_allclose(to_numpy(tgt), a @ b, rtol=1e-12)
    s = xp.zeros(())
    assert einsum("i,i->", xa[0], xa[0], out=s) is s
    assert float(s) == pytest.approx(a[0] @ a[0])


@pytest.mark.parametrize("casting,out_dtype", [("safe", np.complex128), ("same_kind", np.float32),
                                               ("unsafe", np.int64), ("safe", np.float64)])
def test_out_casting_like_numpy(xp, casting, out_dtype):
    a = np.random.default_rng(5).standard_normal((3, 3)) * 10
    ours = xp.empty((3,), out_dtype)
    theirs = np.empty((3,), out_dtype)
    einsum("ij->i", xp.asarray(a), out=ours, casting=casting)
    np.einsum("ij->i", a, out=theirs, casting=casting)
    np.testing.assert_allclose(to_numpy(ours), theirs, rtol=1e-6)


@pytest.mark.parametrize("subscripts,shapes,dtype,out_dtype", [
    ("i->", [(100,)], "int8", "int64"),
    ("i->", [(100,)], "int8", "int16"),
    ("ij,jk->ik", [(10, 10), (10, 10)], "int8", "int64"),
    ("i,i->", [(1000,)] * 2, "float16", "float32"),
])
def test_a_wider_out_widens_the_sums(xp, subscripts, shapes, dtype, out_dtype):
    """numpy computes in the operands' and out's common type: int8 sums into an int64 out
    do not wrap at 8 bits, float16 ones into a float32 out keep float32's precision."""
    rng = np.random.default_rng(7)
    ops = [(rng.integers(90, 110, s) if dtype.startswith("int") else
            rng.uniform(0.5, 1.5, s)).astype(dtype) for s in shapes]
    theirs = np.zeros(np.einsum(subscripts, *ops).shape, out_dtype)
    np.einsum(subscripts, *ops, out=theirs)
    ours = xp.zeros(theirs.shape, out_dtype)
    assert einsum(subscripts, *[xp.asarray(o) for o in ops], out=ours) is ours
    np.testing.assert_allclose(to_numpy(ours), theirs, rtol=1e-6)


@pytest.mark.parametrize("dtype,casting", [("float32", "same_kind"), ("float64", "safe"),
                                           ("complex64", "same_kind"), ("int16", "unsafe")])
def test_dtype_like_numpy(xp, dtype, casting):
    a = np.random.default_rng(6).standard_normal((3, 4)) * 5
    ours = einsum("ij,ij->i", xp.asarray(a), xp.asarray(a), dtype=dtype, casting=casting)
    theirs = np.einsum("ij,ij->i", a, a, dtype=dtype, casting=casting)
    assert ours.dtype == theirs.dtype
    np.testing.assert_allclose(to_numpy(ours), theirs, rtol=1e-5, atol=1)


def test_dtype_upcast_int_to_float(xp):
    a = np.arange(6, dtype=np.int32).reshape(2, 3) + 1
    r = einsum("ij->j", xp.asarray(a), dtype=np.float64)
    assert r.dtype == np.float64
    np.testing.assert_array_equal(to_numpy(r), np.einsum("ij->j", a, dtype=np.float64))


@pytest.mark.parametrize("order,c,f", [("C", True, False), ("F", False, True)])
def test_order(xp, order, c, f):
    a = xp.asarray(np.random.default_rng(8).standard_normal((3, 4)))
    r = einsum("ij,jk->ik", a, a.T, order=order)
    assert (r.flags.c_contiguous, r.flags.f_contiguous) == (c, f)
    r = einsum("ij->ji", a, order=order)
    assert (r.flags.c_contiguous, r.flags.f_contiguous) == (c, f)


@pytest.mark.parametrize("subscripts", ["ij->ji", "ii->i", "ij", "iij->ji", "...ii->...i"])
def test_single_operand_result_is_a_view_as_in_numpy(xp, subscripts):
    a = np.random.default_rng(9).standard_normal((3, 3, 3)[:len(subscripts.split("->")[0]
                                                                  .replace("...", "k"))])
    xa = xp.asarray(a)
    r = einsum(subscripts, xa)
    expected = np.einsum(subscripts, a)
    assert xp.shares_memory(r, xa) and np.shares_memory(expected, a)
    np.testing.assert_array_equal(to_numpy(r), expected)
    r[...] = 1e9  # writes through, as numpy's view does, onto as many elements
    assert int((xa == 1e9).sum()) == r.size


@pytest.mark.parametrize("subscripts", ["ij->ji", "ii->i", "...ii->...i"])
def test_an_expression_of_one_operand_gives_the_same_view(xp, subscripts):
    """contract_expression returns what einsum (and numpy.einsum, which opt_einsum calls)
    returns for a transpose or a diagonal: a view, with no kernel launched."""
    a = np.random.default_rng(13).standard_normal((3, 3, 3)[:len(subscripts.split("->")[0]
                                                                   .replace("...", "k"))])
    xa = xp.asarray(a)
    r = contract_expression(subscripts, a.shape)(xa)
    assert xp.shares_memory(r, xa)
    np.testing.assert_array_equal(to_numpy(r), np.einsum(subscripts, a))


def test_an_expression_gives_each_operand_layout_its_own_view(xp):
    """An expression keeps a view's strides per operand layout: C-ordered, Fortran-ordered
    and strided operands of one shape, in turn and again, each get numpy's view of them."""
    base = np.random.default_rng(14).standard_normal((8, 8))

    def layouts(m):
        full = m.asarray(base)
        return [m.ascontiguousarray(full[:4, :4]), m.asfortranarray(full[:4, :4]),
                full[::2, ::2]]

    expr = contract_expression("ij->ji", (4, 4))
    for a, xa in 2 * list(zip(layouts(np), layouts(xp))):
        r, expected = expr(xa), np.einsum("ij->ji", a)
        assert xp.shares_memory(r, xa) and r.strides == expected.strides
        np.testing.assert_array_equal(to_numpy(r), expected)


@pytest.mark.parametrize("asked", [None, "<f4", ">f4"])
def test_a_byte_swapped_operand_gives_numpys_view(asked):
    """A transpose or diagonal of an operand in the other byte order is a view in that byte
    order, as numpy's is, whatever byte order ``dtype`` names (NumPy only: CuPy has no
    byte-swapped arrays); its sums are computed in native order, as numpy's are."""
    a = np.random.default_rng(15).standard_normal((3, 3)).astype(">f4")
    for subscripts in ("ij->ji", "ii->i"):
        for r in (einsum(subscripts, a, dtype=asked),
                  contract_expression(subscripts, a.shape, dtype=asked)(a)):
            expected = np.einsum(subscripts, a, dtype=asked)
            assert np.shares_memory(r, a) and r.dtype == expected.dtype == a.dtype
            np.testing.assert_array_equal(r, expected)
    trace = einsum("ii", a)
    assert trace.dtype == np.einsum("ii", a).dtype == np.dtype("float32")


@pytest.mark.parametrize("kwargs", [{"dtype": "float64"}, {"order": "C"}])
def test_single_operand_copy_when_a_view_cannot_be_what_was_asked(xp, kwargs):
    a = np.random.default_rng(10).standard_normal((3, 3)).astype(np.float32)
    xa = xp.asarray(a)
    r = einsum("ij->ji", xa, **kwargs)
    assert not xp.shares_memory(r, xa)
    np.testing.assert_array_equal(to_numpy(r), a.T)
    assert r.dtype == np.dtype(kwargs.get("dtype", "float32"))


def test_summed_single_operand_is_not_a_view(xp):
    a = xp.asarray(np.random.default_rng(11).standard_normal((3, 3)))
    assert not xp.shares_memory(einsum("ij->i", a), a)


def test_broadcast_single_operand_is_a_view_as_in_numpy(xp):
    row = np.random.default_rng(12).standard_normal(3)
    a = np.broadcast_to(row, (4, 3))
    expected = np.einsum("ij->ji", a)
    r = einsum("ij->ji", xp.broadcast_to(xp.asarray(row), (4, 3)))
    assert r.strides == expected.strides and r.shape == expected.shape
    np.testing.assert_array_equal(to_numpy(r), expected)
    if xp is np:  # a view of a read-only operand is read-only, as numpy's is
        assert not r.flags.writeable and not expected.flags.writeable


def test_zero_size_operands(xp):
    r = einsum("ij,jk->ik", xp.ones((2, 0)), xp.ones((0, 3)))
    np.testing.assert_array_equal(to_numpy(r), np.zeros((2, 3)))
    assert einsum("ij,jk->ik", xp.ones((0, 2)), xp.ones((2, 3))).shape == (0, 3)
    # an empty operand beside a size-1 label that broadcasts (NumPy gives an empty
    # array's axes stride 0: they are not broadcast axes)
    assert einsum("cc,cb->bc", xp.ones((1, 1)), xp.ones((64, 0))).shape == (0, 64)


BROADCAST_CASES = [
    ("ij,jk->ik", [(1, 5), (5, 4)], [(3, 5), None]),
    ("ij,ij->i", [(1, 6), (3, 6)], [(3, 6), None]),
    ("ij,j->i", [(5, 1), (4,)], [(5, 4), None]),
    ("ij,j->i", [(1, 4), (4,)], [(5, 4), None]),
    ("bij,bjk->bik", [(1, 3, 4), (2, 4, 5)], [(2, 3, 4), None]),
    ("ij->", [(1, 4)], [(3, 4)]),
    ("ij->ji", [(3, 1)], [(3, 5)]),
    ("ii->i", [(1, 1)], [(4, 4)]),
    ("i->i", [()], [(5,)]),
    ("...i,i->...", [(1, 1, 5), (5,)], [(2, 3, 5), None]),
    ("ij,jk,kl->il", [(4, 1), (1, 5), (5, 2)], [(4, 6), (6, 5), None]),
    ("ij,ij->ij", [(1, 3), (2, 1)], [(2, 3), (2, 3)]),
    # an output label dropped from its broadcast operand and left only on another's
    # length-1 diagonal: broadcast back to its full length
    ("ii,i->i", [(1, 1), (1,)], [None, (2,)]),
    ("b,bbe,d->bed", [(1,), (1, 1, 3), (4,)], [(2,), None, None]),
    ("...ddd,...cd->...cd", [(1, 1, 1), (3, 1)], [None, (3, 4)]),
    # a diagonal of a broadcast operand longer than 1: read as it is
    ("ii,i->i", [(1, 1), (1,)], [(3, 3), (3,)]),
]


@pytest.mark.parametrize("subscripts,shapes,broadcast", BROADCAST_CASES)
@pytest.mark.parametrize("order", ["K", "C", "F"])
def test_broadcast_operands_match_numpy(xp, subscripts, shapes, broadcast, order):
    """Operands with stride-0 axes (broadcast_to) give numpy's result, shape and dtype."""
    rng = np.random.default_rng(len(subscripts))
    ops = []
    for s, b in zip(shapes, broadcast):
        x = xp.asarray(rng.standard_normal(s))
        ops.append(xp.broadcast_to(x, b) if b else x)
    got = einsum(subscripts, *ops, order=order)
    want = np.einsum(subscripts, *[to_numpy(o) for o in ops], order=order)
    got_np = np.asarray(to_numpy(got))
    assert got_np.shape == np.shape(want) and got_np.dtype == want.dtype
    np.testing.assert_allclose(got_np, want, rtol=1e-12, atol=1e-12)
    if order == "F" and np.ndim(want) > 1:
        assert got.flags.f_contiguous


def test_broadcast_operands_are_read_once_not_materialised():
    """A 4000 x 4000 operand broadcast from one row: the contraction reads the row once;
    nothing near the broadcast's 128 MB is allocated."""
    import tracemalloc

    row, v = np.random.default_rng(1).standard_normal((2, 4000))
    a = np.broadcast_to(row, (4000, 4000))
    tracemalloc.start()
    got = einsum("ij,j->i", a, v)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    np.testing.assert_allclose(got, np.full(4000, row @ v))
    assert peak < 4e6, peak


def test_stateful_optimiser_with_broadcast_operands_is_called_once():
    """A broadcast operand is contracted once, before any plan of the full shapes: a
    stateful opt_einsum optimiser (which refuses a second, different problem) still works."""
    import opt_einsum
    rng = np.random.default_rng(13)
    x, y = rng.standard_normal(1), rng.standard_normal(1)  # y: label a of size 1 against 2
    z = np.broadcast_to(rng.standard_normal(2), (2, 2))
    got = einsum("b,a,aa", x, y, z, optimize=opt_einsum.RandomGreedy())
    np.testing.assert_allclose(got, np.einsum("b,a,aa", x, y, z))


CONJ_CASES = [  # subscripts, shapes, the operands read conjugated
    ("ij,jk->ik", [(5, 6), (6, 7)], (0,)),            # GEMM, A conjugated
    ("ij,jk->ik", [(5, 6), (6, 7)], (1,)),
    ("ij,jk->ik", [(5, 6), (6, 7)], (0, 1)),
    ("ji,jk->ik", [(6, 5), (6, 7)], (0,)),            # A column-major: the other embedding
    ("bij,bjk->bik", [(3, 4, 5), (3, 5, 6)], (-1,)),  # batched, counted from the end
    ("i,i->", [(7,), (7,)], (0,)),                    # a dot: <x|y>
    ("ij,j->i", [(5, 6), (6,)], (0,)),                # matrix times vector
    ("i,j->ij", [(3,), (4,)], (1,)),                  # outer
    ("ij,ij->ij", [(3, 4), (3, 4)], (0,)),            # elementwise
    ("ii->i", [(4, 4)], (0,)),                        # a diagonal, no product
    ("ij->ji", [(3, 4)], (0,)),                       # a transpose: the result conjugated
    ("ii,ij,jk->k", [(4, 4), (4, 5), (5, 3)], (0, 2)),  # a trace first, then products
]


@pytest.mark.parametrize("subscripts,shapes,conj", CONJ_CASES)
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_conj_reads_operands_conjugated(xp, subscripts, shapes, conj, dtype):
    """einsum(..., conj=) and an expression built with it equal numpy.einsum on the named
    operands' conjugates; real operands (their own conjugates) and a mixed real / complex
    call too."""
    rng = np.random.default_rng(len(subscripts) + len(conj))
    named = [c % len(shapes) for c in conj]

    expr = contract_expression(subscripts, *shapes, conj=conj)

    def check(ops):
        conjugated = [np.conj(to_numpy(o)) if i in named else to_numpy(o)
                      for i, o in enumerate(ops)]
        ref = np.einsum(subscripts, *conjugated)
        check_close(einsum(subscripts, *ops, conj=conj), ref, subscripts, conjugated, xp)
        got = expr(*ops)
        np.testing.assert_allclose(np.asarray(to_numpy(got)), ref, rtol=1e-4, atol=1e-4)

    ops = [random_array(rng, s, dtype, xp=xp) for s in shapes]
    real = [random_array(rng, s, "float64", xp=xp) for s in shapes]
    for operands in (ops, real, [ops[0], *real[1:]]):
        check(operands)


def test_conj_is_checked_like_an_axis_argument(xp):
    """Positions that are not integers: TypeError; out of range or named twice: ValueError,
    naming the position."""
    x = xp.ones(3, np.complex64)
    for bad, err, text in [((2,), ValueError, "position 2 is out of range for 2"),
                           ((-3,), ValueError, "position -3"),
                           ((0, 0), ValueError, "named twice"),
                           ((0.0,), TypeError, "integers, got float"),
                           ((True,), TypeError, "got bool"),
                           ("0", TypeError, "sequence of operand positions"),
                           (1, TypeError, "sequence of operand positions")]:
        with pytest.raises(err, match=text):
            einsum("i,i->", x, x, conj=bad)


def test_conj_of_a_broadcast_operand_and_on_the_warm_path(xp):
    """A broadcast (stride-0) operand read conjugated is right (its conjugate copy holds the
    elements it repeats, not the broadcast); a warm call checks conj= as a first one does
    (True hashes as 1 does)."""
    rng = np.random.default_rng(3)
    a = random_array(rng, (6, 4, 5), "complex128", "broadcast", xp)
    b = random_array(rng, (6, 5, 3), "complex128", xp=xp)
    ha, hb = to_numpy(a), to_numpy(b)
    for conj in [(0,), (1,), (0, 1)]:
        want = np.einsum("bij,bjk->bik", np.conj(ha) if 0 in conj else ha,
                         np.conj(hb) if 1 in conj else hb)
        got = einsum("bij,bjk->bik", a, b, conj=conj)
        np.testing.assert_allclose(to_numpy(got), want, rtol=1e-12, atol=1e-12)
    z = xp.asarray(np.array([1 + 1j, 2 - 1j]))
    assert complex(einsum("i,i->", z, z, conj=(1,))) == 7
    with pytest.raises(TypeError, match="got bool"):
        einsum("i,i->", z, z, conj=(True,))
