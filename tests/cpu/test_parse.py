"""The subscripts grammar: canonical Equations from numpy-style subscripts."""
from __future__ import annotations

import numpy as np
import pytest

from skcontract.parse import Equation, ellipsis_label, parse_equation, split_operands


@pytest.mark.parametrize("subscripts,shapes,canonical", [
    ("ij,jk", [(2, 3), (3, 4)], "ij,jk->ik"),
    ("ij,jk->ki", [(2, 3), (3, 4)], "ij,jk->ki"),
    ("ba", [(2, 3)], "ba->ab"),
    ("bA", [(2, 3)], "bA->Ab"),                # ASCII order: upper case first
    ("ii", [(3, 3)], "ii->"),
    ("i,i", [(3,), (3,)], "i,i->"),
    (" i j , j k -> i k ", [(2, 3), (3, 4)], "ij,jk->ik"),
    ("", [()], "->"),
    (",->", [(), ()], ",->"),
    ("...", [(2, 3)], "αβ->αβ"),
    ("i...", [(2, 3, 4)], "iαβ->αβi"),
    ("...i,...i->...", [(5, 2, 3), (2, 3)], "αβi,βi->αβ"),
    ("...ij->...", [(2, 3)], "ij->"),          # an ellipsis over no dimensions
    ("i...->i", [(2,)], "i->i"),
])
def test_canonical(subscripts, shapes, canonical):
    eq = parse_equation(subscripts, shapes)
    assert isinstance(eq, Equation)
    assert eq.subscripts == canonical
    assert str(eq) == canonical
    # numpy agrees on the output shape
    ops = [np.ones(s) for s in shapes]
    assert tuple(eq.sizes[x] for x in eq.output) == np.shape(np.einsum(subscripts, *ops))


def test_sizes_broadcast():
    eq = parse_equation("ij,jk->ik", [(2, 1), (3, 4)])
    assert dict(eq.sizes) == {"i": 2, "j": 3, "k": 4}
    eq = parse_equation("...i,...i", [(1, 3), (4, 3)])
    assert eq.sizes[ellipsis_label(0)] == 4


def test_ellipsis_labels_never_letters():
    labels = [ellipsis_label(i) for i in range(64)]
    assert len(set(labels)) == 64
    assert not any(x.isascii() for x in labels)


def test_sublist_form():
    a, b = np.ones((2, 3)), np.ones((3, 4))
    subs, ops = split_operands((a, [0, 1], b, [1, 2], [0, 2]))
    assert subs == "AB,BC->AC" and ops[0] is a and ops[1] is b
    subs, _ = split_operands((a, [Ellipsis, 26], [Ellipsis]))
    assert subs == "...a->..."
    subs, _ = split_operands((a, [np.int64(51), 0]))
    assert subs == "zA->Az"  # the implicit output made explicit, numpy's order


def test_string_form():
    a = np.ones(3)
    assert split_operands(("i", a)) == ("i", [a])
    assert split_operands((b"i", a))[0] == "i"


def test_a_kept_form_reports_the_errors_of_a_first_parse():
    """Subscripts parsed before (their form kept for new sizes) report what a first parse
    does: a size error before an invalid output, a term that does not fit its operand with
    that operand's shape."""
    for _ in range(2):
        with pytest.raises(ValueError, match="could not be broadcast"):
            parse_equation("ij,jk->ii", [(2, 3), (4, 5)])
        with pytest.raises(ValueError, match="multiple times"):
            parse_equation("ij,jk->ii", [(2, 3), (3, 5)])
        with pytest.raises(ValueError, match="collapsing index 'i' don't match"):
            parse_equation("ii,i->i", [(2, 3), (2,)])
        for shape in [(2, 3), (4, 5)]:
            with pytest.raises(ValueError, match=rf"has shape \({shape[0]}, {shape[1]}\)"):
                parse_equation("ijk,k", [shape, (3,)])
            with pytest.raises(ValueError, match=rf"has shape \({shape[0]}, {shape[1]}\)"):
                parse_equation("i,k", [shape, (3,)])
