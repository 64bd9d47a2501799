"""Errors: the same exception type as numpy.einsum, and a message naming the culprit."""
from __future__ import annotations

import numpy as np
import pytest

from skcontract.contract import contract_expression, contract_path, einsum
from skcontract.explain import explain

A = np.random.default_rng(0).standard_normal((2, 3))
B = np.random.default_rng(1).standard_normal((3, 4))
ONES23, ONES43 = np.ones((2, 3)) + 0.5, np.ones((4, 3)) + 0.5

# (id, args, kwargs, substrings our message must contain)
CASES = [
    ("no-arguments", (), {}, ["subscripts", "no arguments"]),
    ("subscripts-only", ("ij",), {}, ["'ij'"]),
    ("too-few-operands", ("ij,jk->ik", A), {}, ["1 operands", "2 terms"]),
    ("too-many-operands", ("ij,jk->ik", A, B, A), {}, ["3 operands", "2 terms"]),
    ("invalid-char", ("ij,j$->ik", A, B), {}, ["'$'"]),
    ("invalid-digit", ("i1->i", A), {}, ["'1'"]),
    ("double-arrow", ("ij->->i", A), {}, ["'->'"]),
    ("broken-arrow", ("ij-i", A), {}, ["'-'"]),
    ("lone-gt", ("ij>i", A), {}, ["'>'"]),
    ("arrow-in-input", ("i->j,j->i", A, B), {}, ["'->'"]),
    ("output-label-unknown", ("ij->k", A), {}, ["'k'"]),
    ("output-label-repeated", ("ij->ii", A), {}, ["'i'"]),
    ("too-many-subscripts", ("ijk->i", A), {}, ["operand 0", "(2, 3)"]),
    ("too-few-subscripts", ("i->i", A), {}, ["operand 0", "(2, 3)"]),
    ("too-many-with-ellipsis", ("ijk...->i", A), {}, ["operand 0", "(2, 3)"]),
    ("two-ellipses", ("...i...->", A), {}, ["operand 0", "'...i...'"]),
    ("broken-ellipsis", ("..i->", A), {}, ["operand 0", "'..i'"]),
    ("broken-ellipsis-2", ("i.->", A), {}, ["operand 0"]),
    ("spaced-ellipsis", (". ..i->", A), {}, ["ellipsis"]),
    ("output-needs-ellipsis", ("i...->i", ONES23), {}, ["'...'", "ellipsis"]),
    ("label-size-mismatch", ("ij,jk->ik", A, A), {}, ["'j'", "operand 1", "3", "2"]),
    ("label-size-mismatch-0", ("ij,jk->ik", A, np.ones((0, 4))), {}, ["'j'", "operand 1"]),
    ("diagonal-mismatch", ("ii->i", A), {}, ["'i'", "operand 0", "(2, 3)"]),
    ("diagonal-broadcast", ("ii->i", np.ones((1, 3))), {}, ["'i'", "operand 0"]),
    ("ellipsis-broadcast", ("...i,...i->...", ONES23, ONES43), {},
     ["operand 1", "(4, 3)", "ellipsis"]),
    ("unknown-keyword", ("ij->i", A), {"foo": 1}, ["foo"]),
    ("non-string-subscripts", (3, A), {}, ["subscript"]),
    # (any hashable label is one: numpy's refusals of "a" and 60 are tests/cpu/test_labels.py's)
    ("sublist-unhashable", (A, [0, [1]]), {}, ["[1]", "hashable"]),
    ("sublist-unhashable-output", (A, [0, 1], [{0}]), {}, ["{0}", "hashable"]),
    ("sublist-string", (A, "ij"), {}, ["'ij'"]),
    ("sublist-not-a-sequence", (A, 3), {}, ["operand 0", "3"]),
    ("out-wrong-shape", ("ij->j", A), {"out": np.empty(2)}, ["(2,)", "(3,)"]),
    ("out-not-array", ("ij->ij", A), {"out": [1, 2]}, ["out"]),
    ("out-unsafe-cast", ("ij,jk->ik", A, B), {"out": np.empty((2, 4), np.float32)},
     ["float64", "float32", "'safe'"]),
    ("out-same-kind", ("ij->ij", A), {"out": np.empty((2, 3), np.int64),
                                      "casting": "same_kind"}, ["int64", "'same_kind'"]),
    ("dtype-unsafe", ("ij->", A), {"dtype": "float32"}, ["operand 0", "float32"]),
    ("dtype-int-to-float32", ("i->", np.arange(3)), {"dtype": np.float32},
     ["operand 0", "int64"]),
    ("bad-order", ("ij->ij", A), {"order": "X"}, ["'X'"]),
    ("bad-casting", ("ij->ij", A), {"casting": "foo"}, ["'foo'"]),
    ("bad-dtype", ("ij->ji", A), {"dtype": "foo"}, ["foo"]),
    ("spaced-arrow", ("ij - > ji", A), {}, ["'->'"]),
    ("object-strings-summed", ("i->", np.array(["a", "b"], dtype=object)), {}, ["str"]),
    ("casting-no-mixed", ("i,i", np.ones(3, np.float32), np.ones(3)), {"casting": "no"},
     ["operand 0", "float32", "'no'"]),
    ("casting-equiv-mixed", ("i,i", np.ones(3, np.float32), np.ones(3)),
     {"casting": "equiv"}, ["operand 0", "'equiv'"]),
    ("casting-no-byte-order", ("i,i->i", np.ones(3, ">f8"), np.ones(3)), {"casting": "no"},
     ["operand 0", "'no'"]),
    ("lone-operand", (A,), {}, ["subscripts list"]),
    # numpy reads out in the computation's dtype too: out must cast to dtype= as well
    ("out-not-castable-to-dtype", ("i->", np.arange(3, dtype=np.int8)),
     {"dtype": "int8", "out": np.zeros((), np.float32)}, ["out's", "float32", "int8"]),
    # a bad shape is reported before a bad dtype, as numpy does
    ("shape-before-dtype", ("ii,i", np.ones((2, 3)), np.ones(2)), {"dtype": "f4"},
     ["'i'", "operand 0"]),
]


def _raised(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - we compare exception types
        return e
    return None


@pytest.mark.parametrize("args,kwargs,needles", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_error_matches_numpy(args, kwargs, needles):
    theirs = _raised(np.einsum, *args, **kwargs)
    assert theirs is not None, "numpy accepts this call; the case is wrong"
    ours = _raised(einsum, *args, **kwargs)
    assert ours is not None, f"we accepted a call numpy rejects with {theirs!r}"
    assert type(ours) is type(theirs), (ours, theirs)
    for needle in needles:
        assert needle in str(ours), (needle, str(ours))


def test_unknown_optimizer_is_key_error():
    with pytest.raises(KeyError, match="nope"):
        einsum("ij,jk->ik", A, B, optimize="nope")
    with pytest.raises(KeyError):
        contract_path("ij,jk,kl->il", (2, 3), (3, 4), (4, 5), shapes=True, optimize="nope")


@pytest.mark.parametrize("path,needle", [
    ([(0, 2)], "step 0"),
    (["einsum_path", (0, 1), (0, 1)], "step 1"),
    ([(0, 0)], "step 0"),
    ([("a", 1)], "step 0"),
    ([()], "step 0"),
    (["not_a_path", (0, 1)], "'not_a_path'"),
])
def test_invalid_explicit_path(path, needle):
    with pytest.raises(ValueError, match=needle):
        einsum("ij,jk->ik", A, B, optimize=path)


def test_path_must_end_with_one_operand():
    with pytest.raises(ValueError, match="3 operands remain"):
        einsum("ij,jk,kl->il", A, B, np.ones((4, 2)), optimize=[])
    with pytest.raises(ValueError, match="step 1"):
        einsum("ij,jk,kl->il", A, B, np.ones((4, 2)), optimize=[(0, 1), (0, 2)])


def test_bad_memory_limit():
    with pytest.raises(ValueError, match="memory_limit"):
        einsum("ij,jk,kl->il", A, B, np.ones((4, 2)), memory_limit="lots")


def test_a_cached_call_does_not_vouch_for_an_equal_bad_argument():
    """True == 1 and (0.0, 1) == (0, 1): a call that planned with the int must not let the
    bool through the plan caches or the warm path."""
    c = np.ones((4, 2))
    for _ in range(2):
        einsum("ij,jk,kl->il", A, B, c, memory_limit=1)
        with pytest.raises(TypeError, match="memory_limit"):
            einsum("ij,jk,kl->il", A, B, c, memory_limit=True)
        with pytest.raises(TypeError, match="memory_limit"):
            einsum("ij,jk,kl->il", A, B, c, memory_limit=True, out=np.empty((2, 2)))
        einsum("ij,jk,kl->il", A, B, c, optimize=[(0, 1), (0, 1)])
        with pytest.raises(ValueError, match="step 0"):
            einsum("ij,jk,kl->il", A, B, c, optimize=[(0.0, 1), (0, 1)])


@pytest.mark.parametrize("order", ["c", "f", "a", "k", None, b"C", b"f"])
def test_order_spellings_numpy_accepts(order):
    want = np.einsum("ij,jk->ki", A, B, order=order)
    got = einsum("ij,jk->ki", A, B, order=order)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    name = (order.decode() if isinstance(order, bytes) else order or "K").upper()
    if name in "CF":  # the layout those two ask for
        assert got.flags.c_contiguous == (name == "C") == want.flags.c_contiguous


def test_unsupported_dtype():
    with pytest.raises(TypeError, match="dtype"):
        einsum("i->i", np.array(["a", "b"]))


def test_expression_errors():
    expr = contract_expression("ij,jk->ik", (2, 3), (3, 4), dtype=np.float32)
    with pytest.raises(ValueError, match="takes 2 operands, got 1"):
        expr(A.astype(np.float32))
    with pytest.raises(ValueError, match=r"operand 1 has shape \(4, 3\).*\(3, 4\)"):
        expr(A.astype(np.float32), B.T.astype(np.float32))
    with pytest.raises(TypeError, match="operand 0 has dtype float64"):
        expr(A, B.astype(np.float32))
    with pytest.raises(ValueError, match=r"out has shape \(4, 2\)"):
        expr(A.astype(np.float32), B.astype(np.float32), out=np.empty((4, 2), np.float32))
    with pytest.raises(TypeError, match="float16"):
        expr(A.astype(np.float32), B.astype(np.float32), out=np.empty((2, 4), np.float16))


@pytest.mark.parametrize("call,error,needle", [
    (lambda: contract_path("ij,jk->ik", (2, -3), (-3, 4), shapes=True), ValueError,
     "negative dimension"),
    (lambda: contract_path("ij,jk->ik", (2, 3.0), (3, 4), shapes=True), TypeError, "3.0"),
    (lambda: contract_path("ij,jk->ik", "23", (3, 4), shapes=True), TypeError, "'23'"),
    (lambda: contract_path("ij,jk->ik", (2, True), (3, 4), shapes=True), TypeError, "True"),
    (lambda: contract_path("ij,jk->ik", (2, 3), (3, 4), shapes=True, dtype=str), TypeError,
     "dtype"),
    (lambda: contract_expression("ij,jk->ik", (2, 3), (3, 4), dtype=str), TypeError, "dtype"),
    (lambda: contract_expression("ij,jk->ik", (2, -1), (3, 4)), ValueError, "negative"),
    (lambda: contract_path("ij,jk->ik", (2, 3), (3, 4), shapes=True, memory_limit=2.5),
     ValueError, "memory_limit"),
    (lambda: contract_path("ij,jk->ik", (2, 3), (3, 4), shapes=True, device="a100"),
     ValueError, "'h200', 'h100'"),
    (lambda: contract_path("ij,jk->ik", (2, 3), (3, 4), shapes=True, device=3), TypeError,
     "DeviceInfo"),
    (lambda: explain("ij,jk->ik", (2, 3), (3, 4), shapes=True, draw=True), TypeError, "draw"),
    (lambda: einsum("ij,jk->ik", A, B, precision="fp16"), ValueError, "precision.*'fp16'"),
    (lambda: einsum("ij,jk->ik", A, B, precision=["tf32"]), ValueError, "precision"),
    (lambda: contract_path("ij,jk->ik", (2, 3), (3, 4), shapes=True, precision="TF32"),
     ValueError, "precision.*'3xtf32'"),
    (lambda: contract_expression("ij,jk->ik", (2, 3), (3, 4), precision=True), ValueError,
     "precision"),
])
def test_the_front_door_names_what_is_wrong(call, error, needle):
    with pytest.raises(error, match=needle):
        call()


@pytest.mark.parametrize("field,value", [("sms", 0), ("sms", -1), ("ctas_per_sm", 0),
                                         ("compute_capability", (9,)), ("smem_per_sm", 1.5)])
def test_device_info_refuses_impossible_devices(field, value):
    import dataclasses

    from skcontract.schedule import DeviceInfo
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(DeviceInfo.h200(), **{field: value})


def test_device_names():
    from skcontract.schedule import DeviceInfo
    _, plan = contract_path("ij,jk->ik", (256, 512), (512, 128), shapes=True, device="h100")
    assert plan.device.name == "NVIDIA H100 (preset)"
    assert DeviceInfo.named("H200") == DeviceInfo.h200()


def test_cupy_backend_without_cupy_says_what_to_install():
    try:
        import cupy  # noqa: F401 - only whether it imports
    except ImportError:
        with pytest.raises(ImportError, match=r"pip install 'skcontract\[cuda13\]'"):
            einsum("ij,jk->ik", A, B, backend="cupy")
    else:
        pytest.skip("CuPy is installed here")


def test_an_array_given_as_a_shape_is_named_by_its_shape_not_its_contents():
    """contract_expression takes shapes: an array in their place is a TypeError that names
    its shape and dtype, in a short message (not the array's elements), and fast."""
    import time
    a = np.ones((1000, 1000))
    t0 = time.perf_counter()
    with pytest.raises(TypeError, match=r"operand 0 is an array of shape \(1000, 1000\)") as e:
        contract_expression("ij,jk->ik", a, a)
    assert len(str(e.value)) < 300 and time.perf_counter() - t0 < 1.0
    with pytest.raises(TypeError) as e:
        contract_expression("ij,jk->ik", [[1.5] * 1000] * 3, (3, 4))
    assert len(str(e.value)) < 300


def test_shapes_given_without_shapes_true_get_a_hint():
    with pytest.raises(ValueError, match="pass shapes=True"):
        contract_path("ij,jk->ik", (4, 5), (5, 6))
    with pytest.raises(ValueError) as e:  # arrays that do not fit: no hint about shapes
        contract_path("ij,jk->ik", np.ones(3), np.ones((3, 4)))
    assert "shapes=True" not in str(e.value)
