"""Any number of labels: the interleaved form with any hashable labels, string subscripts
with unicode symbols (opt_einsum's ``get_symbol`` range), networks past 52 labels; numpy's
behaviour and errors where numpy takes the input."""
from __future__ import annotations

import pickle
import time

import numpy as np
import opt_einsum
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skcontract.__main__ import main
from skcontract.contract import contract_expression, contract_path, einsum, tensordot
from skcontract.explain import explain
from skcontract.parse import (LETTERS, Subscripts, ellipsis_label, is_symbol, parse_equation,
                              split_operands, symbol)


def regular3(n: int, seed: int) -> list[tuple[int, int]]:
    """The edges of a random 3-regular simple graph on ``n`` vertices (``n`` even): the
    pairing model, drawn again until it has no loop and no double edge."""
    rng = np.random.default_rng(seed)
    while True:
        edges = rng.permutation(np.repeat(np.arange(n), 3)).reshape(-1, 2)
        if (edges[:, 0] != edges[:, 1]).all() and \
                len({tuple(sorted(e)) for e in edges.tolist()}) == len(edges):
            return [(int(u), int(v)) for u, v in edges]


def graph_legs(n: int, edges, label=lambda b: b) -> list[list]:
    """Each vertex's bonds (edges), as labels ``label(edge index)``."""
    legs: list[list] = [[] for _ in range(n)]
    for b, (u, v) in enumerate(edges):
        legs[u].append(label(b))
        legs[v].append(label(b))
    return legs


def interleave(operands, legs, output=None) -> list:
    args = []
    for op, lab in zip(operands, legs):
        args += [op, lab]
    return args + ([output] if output is not None else [])


def reference(legs, arrays, output=()):
    """The contraction by opt_einsum with NumPy, in opt_einsum's own unicode symbols."""
    sym = {lab: opt_einsum.get_symbol(i)
           for i, lab in enumerate(dict.fromkeys(x for t in legs for x in t))}
    subs = ",".join("".join(sym[x] for x in t) for t in legs) + "->" + \
        "".join(sym[x] for x in output)
    return opt_einsum.contract(subs, *arrays, backend="numpy", optimize="greedy")


def test_symbols_past_the_letters_are_opt_einsums():
    assert "".join(symbol(i) for i in range(52)) == LETTERS  # numpy's sublist order
    for i in (52, 53, 1000, 55155):  # (from 55156 on opt_einsum's are surrogates a while)
        assert symbol(i) == opt_einsum.get_symbol(i)
    for i in (55156, 55295, 55296, 60000, 200000, 1111923):
        assert is_symbol(symbol(i)) and not 0xD800 <= ord(symbol(i)) < 0xE000
    assert len({symbol(i) for i in range(56000)}) == 56000
    assert not any(is_symbol(c) for c in "0123456789 ,.->$_\t\xa0µ¿")
    assert all(is_symbol(c) for c in "aZÀαЖ中😀")


# ---- the 3-regular graph: planned at n = 250, contracted at n = 60 --------------------

@pytest.mark.parametrize("label", [lambda b: b, lambda b: f"bond{b}", lambda b: (b, "x")],
                         ids=["int", "str", "tuple"])
def test_random_regular_graph_of_250_tensors_plans(label):
    n = 250
    edges = regular3(n, 0)
    legs = graph_legs(n, edges, label)
    t0 = time.perf_counter()
    path, plan = contract_path(*interleave([(2, 2, 2)] * n, legs), shapes=True)
    seconds = time.perf_counter() - t0
    assert len(plan.equation.sizes) == 375 and plan.output_shape == ()
    assert len(path) == n - 1 and len(plan.steps) == n - 1
    assert seconds < 30  # issue 52: planning <= 30 s for up to 300 tensors
    # the same network written as strings of symbols plans the same path
    sym = {lab: opt_einsum.get_symbol(i) for i, lab in enumerate(
        dict.fromkeys(x for t in legs for x in t))}
    subs = ",".join("".join(sym[x] for x in t) for t in legs) + "->"
    path2, plan2 = contract_path(subs, *[(2, 2, 2)] * n, shapes=True)
    assert path2 == path and plan2.flops == plan.flops
    # opt_einsum's own path for it costs the same
    _, info = opt_einsum.contract_path(subs, *[(2, 2, 2)] * n, shapes=True, optimize="auto")
    assert plan.largest_intermediate == info.largest_intermediate
    # the printed plan: symbols, and a legend back to the labels
    text = str(plan)
    assert "labels: " in text and f"={label(0)!r}" in text and f"={label(374)!r}" in text
    assert all(len(line) < 400 for line in text.splitlines()[1:10])


@pytest.mark.parametrize("label", [lambda b: b + 1000, lambda b: f"e{b}", lambda b: -b - 1],
                         ids=["int", "str", "negative"])
def test_random_regular_graph_of_60_tensors_contracts_like_numpy(label):
    n = 60
    edges = regular3(n, 1)
    legs = graph_legs(n, edges, label)
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((2, 2, 2)) for _ in range(n)]
    want = reference(legs, arrays)
    bound = reference(legs, [np.abs(a) for a in arrays])
    got = einsum(*interleave(arrays, legs))
    assert got.shape == () and abs(got - want) <= 1e-12 * bound
    # and with open bonds: two vertices' first bonds cut, kept in the output
    out = [legs[0][0], legs[5][1]]
    got = einsum(*interleave(arrays, legs, out))
    want = reference(legs, arrays, out)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12 * float(bound))


def test_lattice_10x10_in_unicode_symbols():
    """A 10 x 10 lattice of bond dimension 2, written as a string of symbols (CJK
    characters), four corner legs open."""
    L = 10
    bonds = {}

    def bond(a, b):
        return bonds.setdefault((min(a, b), max(a, b)), chr(0x4E00 + len(bonds)))
    terms, shapes = [], []
    for r in range(L):
        for c in range(L):
            t = [bond((r, c), (r + dr, c + dc)) for dr, dc in ((-1, 0), (0, -1), (0, 1), (1, 0))
                 if 0 <= r + dr < L and 0 <= c + dc < L]
            if (r, c) in ((0, 0), (L - 1, L - 1)):
                t.append(chr(0x3041 + len(terms)))  # a physical leg, left open (hiragana)
            terms.append("".join(t))
            shapes.append((2,) * len(t))
    assert len(bonds) == 180
    subs = ",".join(terms)  # implicit output: the open legs, in code point order
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s) / 1.5 for s in shapes]
    eq = parse_equation(subs, shapes)
    assert len(eq.sizes) == 182 and eq.output == (chr(0x3041), chr(0x3041 + 99))
    want = opt_einsum.contract(subs, *arrays, backend="numpy", optimize="greedy")
    got = einsum(subs, *arrays)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    path, plan = contract_path(subs, *arrays)
    assert "labels:" not in str(plan) and terms[0] in str(plan)  # printed as given
    expr = contract_expression(subs, *shapes)
    np.testing.assert_allclose(expr(*arrays), want, rtol=1e-9)


# ---- the interleaved form ----------------------------------------------------------------

LABEL_KINDS = {
    "big-ints": st.integers(52, 10**6),
    "negative-ints": st.integers(-10**18, -1),
    "huge-ints": st.integers(10**30, 10**30 + 10**6),
    "strings": st.text(min_size=0, max_size=3),
    "tuples": st.tuples(st.integers(0, 3), st.sampled_from("xy")),
}


@st.composite
def interleaved_cases(draw):
    """A random contraction in the interleaved form with labels of one kind (so that they
    sort), its numpy equivalent in letters (in the labels' sorted order) and arrays."""
    kind = draw(st.sampled_from(sorted(LABEL_KINDS)))
    pool = draw(st.lists(LABEL_KINDS[kind], min_size=1, max_size=6, unique=True))
    sizes = {lab: draw(st.integers(1, 3)) for lab in pool}
    letter = {lab: LETTERS[i] for i, lab in enumerate(sorted(pool))}
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    terms = [draw(st.lists(st.sampled_from(pool), max_size=4))
             for _ in range(draw(st.integers(1, 4)))]
    present = list(dict.fromkeys(x for t in terms for x in t))
    output = None
    if draw(st.booleans()):
        output = draw(st.permutations(present))[:draw(st.integers(0, len(present)))]
    arrays = [rng.standard_normal([sizes[x] for x in t]) for t in terms]
    subs = ",".join("".join(letter[x] for x in t) for t in terms)
    if output is not None:
        subs += "->" + "".join(letter[x] for x in output)
    return interleave(arrays, terms, output), subs, arrays


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(interleaved_cases())
def test_interleaved_any_hashable_labels_match_numpy(case):
    args, subs, arrays = case
    want = np.einsum(subs, *arrays)
    got = einsum(*args)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    _, plan = contract_path(*args)
    assert plan.output_shape == np.shape(want)


def test_interleaved_labels_get_symbols_and_a_legend():
    a, b = np.ones((2, 3)), np.ones((3, 4))
    subs, ops = split_operands((a, [0, 60], b, [60, (1, 2)]))
    assert isinstance(subs, Subscripts) and ops[0] is a and ops[1] is b
    assert subs == "AÈ,ÈÀ->AÀ"  # 0 -> numpy's 'A', 60 -> symbol(60), a tuple the next free
    assert subs.legend == (("A", 0), ("È", 60), ("À", (1, 2)))
    subs, _ = split_operands((a, ["i", "j"], b, ["j", "k"]))
    assert subs == "ij,jk->ik" and subs.legend == ()  # one-letter strings are themselves
    subs, _ = split_operands((a, [0, 1], b, [1, 2]))
    assert subs == "AB,BC->AC" and subs.legend == ()  # numpy's ints: no legend needed
    subs, _ = split_operands((a, ["A", 0], b, [0, "x"]))  # 'A' is 0's: the string moves
    assert subs == "ÀA,Ax->Àx" and dict(subs.legend) == {"À": "A", "A": 0}
    # equal labels are one label (1 == np.int64(1) == 1.0 == True)
    subs, _ = split_operands((a, [np.int64(1), 7], b, [7, 1.0]))
    assert subs == "BH,HB->"
    assert pickle.loads(pickle.dumps(subs)).legend == subs.legend


def test_interleaved_implicit_output_is_sorted_or_in_order_of_appearance():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    assert einsum(a, [100, 7], b, [7, -5]).shape == (4, 2)  # -5 < 100
    assert einsum(a, ["z", "k"], b, ["k", "b"]).shape == (4, 2)  # 'b' < 'z'
    # an int and a string do not compare: in order of first appearance
    np.testing.assert_array_equal(einsum(a, ["x", 7], b, [7, 3]), a @ b)
    np.testing.assert_array_equal(einsum(a, [3, 7], b, [7, "x"]), a @ b)
    # the ellipsis first, as numpy puts it
    x = np.ones((5, 2, 3))
    assert einsum(x, [..., 70, 71], b, [71, 99]).shape == (5, 2, 4)


def test_interleaved_in_every_entry_point():
    rng = np.random.default_rng(4)
    a, b, c = (rng.standard_normal(s) for s in ((2, 3), (3, 4), (4, 5)))
    want = a @ b @ c
    args = (a, ["i", 100], b, [100, (0, 1)], c, [(0, 1), -7], ["i", -7])
    np.testing.assert_allclose(einsum(*args), want)
    path, plan = contract_path(*args)
    assert len(path) == 2 and "labels: " in str(plan) and "=(0, 1)" in str(plan)
    plan = explain(*args)
    assert "=-7" in str(plan)
    expr = contract_expression((2, 3), ["i", 100], (3, 4), [100, (0, 1)], (4, 5),
                               [(0, 1), -7], ["i", -7])
    np.testing.assert_allclose(expr(a, b, c), want)
    assert "labels: " in repr(expr.plan)
    expr = contract_expression((2, 3), ["i", 100], b, [100, (0, 1)], (4, 5), [(0, 1), -7],
                               constants=[1])
    np.testing.assert_allclose(expr(a, c), want)
    path2, _ = contract_path((2, 3), ["i", 100], (3, 4), [100, (0, 1)], (4, 5), [(0, 1), -7],
                             ["i", -7], shapes=True)
    assert path2 == path


def test_more_than_52_labels_in_one_operand_and_an_ellipsis():
    """60 labels of size 1 on one operand, an ellipsis beside them, strings that take the
    Greek letters ellipsis dimensions print as: none collides."""
    x = np.arange(6.0).reshape((2,) + (1,) * 60 + (3,))
    labels = list(range(1000, 1060))
    got = einsum(x, [..., *labels, 5], [5, ...])
    np.testing.assert_array_equal(got, x.reshape(2, 3).T)
    subs = "αβ...,β->α..."
    y, v = np.ones((2, 3, 4, 5)), np.arange(3.0)
    eq = parse_equation(subs, [y.shape, v.shape])
    assert not set(eq.ellipsis) & {"α", "β"} and eq.ellipsis == (ellipsis_label(2),
                                                                 ellipsis_label(3))
    np.testing.assert_array_equal(einsum(subs, y, v), np.einsum("ab...,b->a...", y, v))


def test_tensordot_past_52_dimensions():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2,) * 6 + (1,) * 30)
    b = rng.standard_normal((1,) * 20 + (3,) * 2 + (1,) * 18)
    np.testing.assert_allclose(tensordot(a, b, axes=20), np.tensordot(a, b, axes=20))


def test_broadcast_operands_past_52_labels():
    """A broadcast (stride 0) operand among more than 52 labels is read once too."""
    rng = np.random.default_rng(6)
    legs = graph_legs(20, regular3(20, 7), lambda e: e + 500)
    arrays = [rng.standard_normal((2, 2, 2)) for _ in range(20)]
    arrays[3] = np.broadcast_to(rng.standard_normal((2, 1, 2)), (2, 2, 2))
    want = reference(legs, arrays)
    np.testing.assert_allclose(einsum(*interleave(arrays, legs)), want, rtol=1e-10)


# ---- errors --------------------------------------------------------------------------------

A = np.ones((2, 3))


@pytest.mark.parametrize("args,error,needle", [
    ((A, [0, [1]]), TypeError, "hashable.*list \\[1\\]"),
    ((A, [0, 1], [np.arange(2)]), TypeError, "hashable.*the output"),
    ((A, [{"a": 1}, 1]), TypeError, "hashable.*dict"),
    ((A, "ij"), TypeError, "'ij'"),
    ((A, [0, 1, 2]), ValueError, "too many subscripts for operand 0"),
    ((A, [100, 100]), ValueError, "100 \\('ð'\\).*operand 0"),  # a diagonal of 2 x 3
    ((A, ["x", "y"], np.ones((4, 3)), ["z", "y"], ["x", "x"]), ValueError,
     "'x' multiple times"),
    ((A, [(1, 2), 3], [(1, 2), (5, 6)]), ValueError, "\\(5, 6\\) \\('Á'\\) which never"),
    ((A, [500, 501], np.ones((4, 3)), [501, 502]), ValueError, "label 501 \\('ʁ'\\)"),
])
def test_interleaved_errors_name_the_label_as_given(args, error, needle):
    with pytest.raises(error, match=needle):
        einsum(*args)


@pytest.mark.parametrize("subscripts,needle", [
    ("ij-k", "'-'"),
    ("ij>k", "'>'"),
    ("ij->i-", "'-'"),
    ("i->j->", "'->' appears more than once"),
    ("ij - > ji", "space \\(' '\\) inside '->'"),
    ("ij->i,j", "','"),
    ("i.j", "'\\.'"),
    (". ..ij", "space \\(' '\\) inside an ellipsis"),
    ("i1", "'1'"),
    ("iµ", "'µ'"),   # U+00B5: below U+00C0
    ("i\t", "'\\\\t'"),
    ("i_", "'_'"),
])
def test_operator_and_invalid_characters_raise_numpys_value_error(subscripts, needle):
    ours = pytest.raises(ValueError, einsum, subscripts, A)
    assert ours.match(needle)
    with pytest.raises(ValueError):  # numpy too (UnicodeEncodeError is a ValueError)
        np.einsum(subscripts, A)


@pytest.mark.parametrize("subscripts", ["iα", "Àj", "中文", "😀i", "iß"])
def test_unicode_symbols_numpy_refuses_are_labels(subscripts):
    x = np.arange(6.0).reshape(2, 3)
    with pytest.raises(ValueError):
        np.einsum(subscripts, x)
    want = np.einsum("ij" if subscripts[0] < subscripts[1] else "ji", x)
    np.testing.assert_array_equal(einsum(subscripts, x), want)


def test_the_command_line_takes_unicode_subscripts(capsys):
    assert main(["explain", "αβ,βγ->αγ", "64x32", "32x16"]) == 0
    out = capsys.readouterr().out
    assert "αβ,βγ->αγ" in out and "α=64" in out and "β=32" in out
    with pytest.raises(SystemExit):
        main(["explain", "αβ,β1->α", "64x32", "32x16"])
    assert "'1'" in capsys.readouterr().err
