"""numpy-compatible einsum subscripts -> a canonical :class:`Equation`.

The grammar and the errors follow ``numpy.einsum`` (same exception types; messages that
name the offending label, operand or shape):

* terms separated by ``,``, an optional ``->`` output; spaces are ignored;
* labels are ASCII letters, upper and lower case distinct;
* ``...`` (once per term) stands for the leading/middle dimensions not named; the ellipsis
  dimensions of all operands are right-aligned and broadcast against each other;
* the implicit output (no ``->``) is the ellipsis dimensions followed by the labels that
  appear exactly once, in alphabetical (ASCII) order;
* a label broadcasts: an operand whose dimension for a label is 1 is broadcast against a
  larger size of that label elsewhere (but a label repeated inside one operand, a diagonal,
  must have equal sizes there);
* the sublist form ``einsum(op0, [0, 1], op1, [1, 2], [0, 2])`` with integers 0..51 and
  ``Ellipsis``.

Ellipsis dimensions get internal labels (Greek letters, then Cyrillic ones) that can never
collide with user labels; that is how they print in a plan.

>>> eq = parse_equation("ij,jk", [(2, 3), (3, 4)])
>>> eq.subscripts
'ij,jk->ik'
>>> eq.sizes['j']
3
>>> parse_equation("...i,i->...", [(5, 2, 3), (3,)]).subscripts
'αβi,i->αβ'
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

__all__ = ["Equation", "parse_equation", "split_operands", "ellipsis_label", "LETTERS"]

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_LETTER_SET = frozenset(LETTERS)
_GREEK = "αβγδεζηθικλμνξοπρστυφχψω"  # 24 letters, no final sigma


def ellipsis_label(i: int) -> str:
    """The internal label of the ``i``-th ellipsis dimension (never an ASCII letter)."""
    return _GREEK[i] if i < len(_GREEK) else chr(0x0410 + i - len(_GREEK))


@dataclass(frozen=True)
class Equation:
    """A parsed, validated einsum: one label tuple per operand (axis order), the output.

    ``sizes`` maps every label to its broadcast size; ``shapes`` are the operands' shapes
    as given. ``ellipsis`` holds the internal labels the ``...`` dimensions received.
    """

    inputs: tuple[tuple[str, ...], ...]
    output: tuple[str, ...]
    sizes: Mapping[str, int]
    shapes: tuple[tuple[int, ...], ...]
    ellipsis: tuple[str, ...] = ()

    @property
    def subscripts(self) -> str:
        return ",".join("".join(t) for t in self.inputs) + "->" + "".join(self.output)

    def __str__(self) -> str:
        return self.subscripts


def _sublist_to_term(sub: Any) -> str:
    try:
        items = list(sub)
    except TypeError:
        raise TypeError("each subscript must be either an integer or an ellipsis; "
                        f"got the non-sequence {sub!r}") from None
    out = []
    for s in items:
        if s is Ellipsis:
            out.append("...")
        elif hasattr(s, "__index__") and not isinstance(s, (bool, str, bytes)):
            try:
                i = operator.index(s)
            except TypeError:
                raise TypeError("each subscript must be either an integer or an ellipsis "
                                "(or the first argument a subscripts string); got "
                                f"{type(s).__name__} {s!r}") from None
            if not 0 <= i < len(LETTERS):
                raise ValueError(f"subscript {i} is not within the valid range [0, 52)")
            out.append(LETTERS[i])
        else:
            raise TypeError("each subscript must be either an integer or an ellipsis "
                            f"(or the first argument a subscripts string); got {s!r}")
    return "".join(out)


def split_operands(args: Sequence[Any]) -> tuple[str, list]:
    """``einsum``'s positional arguments -> (subscripts string, operands).

    Accepts ``(subscripts, *operands)`` and the interleaved sublist form
    ``(op0, sub0, op1, sub1, ..., [sub_out])``.
    """
    if len(args) == 0:
        raise ValueError("must specify the einstein sum subscripts string and at least one "
                         "operand, or at least one operand and its corresponding subscripts "
                         "list (no arguments were given)")
    first = args[0]
    if isinstance(first, str):
        if len(args) == 1:
            raise ValueError("must specify the einstein sum subscripts string and at least "
                             f"one operand (only the subscripts {first!r} were given)")
        return first, list(args[1:])
    if isinstance(first, bytes):
        return first.decode("ascii"), list(args[1:])
    if len(args) == 1:  # an operand without its subscripts list
        raise ValueError("must provide at least an operand and a subscripts list to einsum "
                         f"(got a lone {type(first).__name__})")
    # sublist form
    rest = list(args)
    ops, terms = [], []
    while len(rest) >= 2:
        ops.append(rest.pop(0))
        terms.append(_sublist_to_term(rest.pop(0)))
    subs = ",".join(terms)
    if rest:
        subs += "->" + _sublist_to_term(rest.pop(0))
    return subs, ops


def _split_term(term: str, where: str) -> tuple[str, str | None, str]:
    """A term -> (labels before '...', the ellipsis or None, labels after)."""
    n_dots = term.count(".")
    if n_dots == 0:
        return term, None, ""
    pos = term.find("...")
    if n_dots != 3 or pos < 0:
        raise ValueError("einstein sum subscripts string contains a '.' that is not part of "
                         f"an ellipsis ('...') in {where} ({term!r})")
    return term[:pos], "...", term[pos + 3:]


def _check_labels(labels: str, where: str) -> None:
    for c in labels:
        if c not in _LETTER_SET:
            raise ValueError(f"invalid subscript {c!r} in einstein sum subscripts string "
                             f"({where}), subscripts must be letters")


def parse_equation(subscripts: str, shapes: Sequence[Sequence[int]]) -> Equation:
    """Validate ``subscripts`` against the operands' ``shapes``; return the Equation."""
    if not isinstance(subscripts, str):
        raise TypeError("einsum subscripts must be a string, got "
                        f"{type(subscripts).__name__}")
    if re.search(r"\.\s+\.", subscripts):
        raise ValueError("einstein sum subscripts string contains a '.' that is not part of "
                         f"an ellipsis ('...'): spaces inside an ellipsis in {subscripts!r}")
    if re.search(r"-(?!>)|(?<!-)>", subscripts):
        raise ValueError("einstein sum subscript string does not contain proper '->' output "
                         f"specified: a '-' or '>' not part of '->' in {subscripts!r}")
    subs = subscripts.replace(" ", "")
    n_arrow = subs.count("->")
    if n_arrow > 1 or (n_arrow == 0 and ("-" in subs or ">" in subs)):
        bad = "'->' appears more than once" if n_arrow > 1 else "a lone '-' or '>'"
        raise ValueError("einstein sum subscript string does not contain proper '->' output "
                         f"specified: {bad} in {subscripts!r}")
    if n_arrow == 1:
        lhs, rhs = subs.split("->")
        if "-" in rhs or ">" in rhs or "-" in lhs or ">" in lhs:
            raise ValueError("einstein sum subscript string does not contain proper '->' "
                             f"output specified: misplaced '-' or '>' in {subscripts!r}")
    else:
        lhs, rhs = subs, None
    if "," in (rhs or ""):
        raise ValueError(f"the output subscripts {rhs!r} contain ',' (only the inputs are "
                         "separated by commas)")
    terms = lhs.split(",")
    n_ops = len(shapes)
    if len(terms) < n_ops:
        raise ValueError(f"more operands provided to einstein sum function than specified in "
                         f"the subscripts string ({n_ops} operands for {len(terms)} terms "
                         f"in {subscripts!r})")
    if len(terms) > n_ops:
        raise ValueError(f"fewer operands provided to einstein sum function than specified in "
                         f"the subscripts string ({n_ops} operands for {len(terms)} terms "
                         f"in {subscripts!r})")

    split = []
    for i, term in enumerate(terms):
        where = f"operand {i}"
        head, ell, tail = _split_term(term, where)
        _check_labels(head + tail, where)
        ndim = len(shapes[i])
        named = len(head) + len(tail)
        if ell is None and named != ndim:
            if named > ndim:
                raise ValueError(f"einstein sum subscripts string contains too many "
                                 f"subscripts for operand {i}: {term!r} names {named} "
                                 f"dimensions, the operand has shape {tuple(shapes[i])}")
            raise ValueError(f"operand has more dimensions than subscripts given in einstein "
                             f"sum, but no '...' ellipsis provided to broadcast the extra "
                             f"dimensions: operand {i} has shape {tuple(shapes[i])} for the "
                             f"subscripts {term!r}")
        if ell is not None and named > ndim:
            raise ValueError(f"einstein sum subscripts string contains too many subscripts "
                             f"for operand {i}: {term!r} names {named} dimensions, the "
                             f"operand has shape {tuple(shapes[i])}")
        split.append((head, ell, tail, ndim - named if ell is not None else 0))

    n_ell = max((s[3] for s in split), default=0)
    ell_labels = tuple(ellipsis_label(i) for i in range(n_ell))

    inputs = []
    sizes: dict[str, int] = {}
    for i, (head, ell, tail, ne) in enumerate(split):
        labels = tuple(head) + ell_labels[n_ell - ne:] + tuple(tail)
        shape = tuple(int(d) for d in shapes[i])
        seen: dict[str, int] = {}
        for lab, d in zip(labels, shape):
            if lab in seen:
                if seen[lab] != d:
                    raise ValueError(
                        f"dimensions in operand {i} for collapsing index {_show(lab)} don't "
                        f"match ({seen[lab]} != {d}); operand {i} has shape {shape}")
                continue
            seen[lab] = d
            prev = sizes.get(lab)
            if prev is None or prev == 1:
                sizes[lab] = d
            elif d != 1 and d != prev:
                raise ValueError(
                    f"operands could not be broadcast together: size of label {_show(lab)} "
                    f"for operand {i} (shape {shape}) is {d}, but it is {prev} in an "
                    f"earlier operand")
        inputs.append(labels)

    if rhs is None:
        counts: dict[str, int] = {}
        for t in inputs:
            for lab in t:
                counts[lab] = counts.get(lab, 0) + 1
        singles = sorted(lab for lab, c in counts.items() if c == 1 and lab in _LETTER_SET)
        output = ell_labels + tuple(singles)
    else:
        head, ell, tail = _split_term(rhs, "the output")
        _check_labels(head + tail, "the output")
        for lab in head + tail:
            if lab not in sizes:
                raise ValueError(f"einstein sum subscripts string included output subscript "
                                 f"{lab!r} which never appeared in an input")
        if ell is None and n_ell > 0:
            raise ValueError("output has more dimensions than subscripts given in einstein "
                             "sum, but no '...' ellipsis provided to broadcast the extra "
                             f"dimensions ({n_ell} ellipsis dimension(s) in the inputs of "
                             f"{subscripts!r})")
        output = tuple(head) + (ell_labels if ell is not None else ()) + tuple(tail)
        seen_out = set()
        for lab in output:
            if lab in seen_out:
                raise ValueError(f"einstein sum subscripts string includes output subscript "
                                 f"{_show(lab)} multiple times")
            seen_out.add(lab)
    return Equation(tuple(inputs), output, sizes, tuple(tuple(int(d) for d in s)
                                                         for s in shapes), ell_labels)


def _show(label: str) -> str:
    if label in _LETTER_SET:
        return repr(label)
    return f"{label!r} (an ellipsis dimension)"
