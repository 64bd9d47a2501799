"""Hypothesis strategies of random contractions, shared by the property tests."""
import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from opt_einsum.testing import rand_equation

MAX_OPERAND_ELEMENTS = 2**22
"""The most elements a drawn network's operands hold together (32 MiB of float64): a term
of many labels, a diagonal and a batch axis can otherwise draw arrays of tens of GiB, which
the CI machine cannot allocate (an operand of 45 GiB was drawn once)."""


@st.composite
def networks(draw, tensors=(2, 7), d_min=1, d_max=5):
    """(subscripts, operands): a random network of ``tensors`` tensors, labels of ``d_min``
    - ``d_max`` elements, 0 - 3 output labels; maybe one term's first label repeated (a
    diagonal of it), maybe a batch axis of 2 - 3 elements under an ellipsis in every term
    and the output."""
    n = draw(st.integers(*tensors))
    eq, shapes = rand_equation(n, draw(st.integers(2, 3)), n_out=draw(st.integers(0, 3)),
                               d_min=d_min, d_max=d_max, seed=draw(st.integers(0, 2**16)),
                               return_size_dict=False)
    terms, out = eq.split("->")
    terms, shapes = terms.split(","), [list(s) for s in shapes]
    if draw(st.booleans()):  # a diagonal: term t's first label twice
        t = draw(st.integers(0, n - 1))
        if terms[t]:
            terms[t] += terms[t][0]
            shapes[t].append(shapes[t][0])
    if draw(st.booleans()):  # batch axes under '...'
        batch = draw(st.integers(2, 3))
        terms, out = ["..." + t for t in terms], "..." + out
        shapes = [[batch] + s for s in shapes]
    assume(sum(int(np.prod(s)) for s in shapes) <= MAX_OPERAND_ELEMENTS)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    ops = [rng.standard_normal(s) for s in shapes]
    return ",".join(terms) + "->" + out, ops
