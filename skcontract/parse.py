"""numpy-compatible einsum subscripts -> a canonical :class:`Equation`.

The grammar and the errors follow ``numpy.einsum`` (same exception types; messages that
name the offending label, operand or shape), with any number of labels:

* terms separated by ``,``, an optional ``->`` output; spaces are ignored (but not inside
  ``->`` or ``...``);
* a label is one character: an ASCII letter (upper and lower case distinct), as numpy
  takes, or any unicode character from U+00C0 on (surrogates excepted), the range of
  opt_einsum's ``get_symbol``: ``'αβ,βγ->αγ'`` or a string of ``get_symbol(i)`` for a
  network of thousands of labels;
* ``...`` (once per term) stands for the leading/middle dimensions not named; the ellipsis
  dimensions of all operands are right-aligned and broadcast against each other;
* the implicit output (no ``->``) is the ellipsis dimensions followed by the labels that
  appear exactly once, in code point order (ASCII's for letters, upper case first);
* a label broadcasts: an operand whose dimension for a label is 1 is broadcast against a
  larger size of that label elsewhere (but a label repeated inside one operand, a diagonal,
  must have equal sizes there);
* the interleaved (sublist) form ``einsum(op0, [0, 1], op1, [1, 2], [0, 2])`` takes any
  hashable labels (ints of any size, strings, tuples, ...) and ``Ellipsis``; equal labels
  (``1``, ``np.int64(1)``, ``1.0``) are one label. Each label gets a symbol
  (:func:`interleaved_symbols`): the ints 0..51 numpy's letters (0 -> 'A', 26 -> 'a'),
  other non-negative ints ``i`` the character :func:`symbol` ``(i)``, a one-character
  string that is a valid label itself, any other label the next unused symbol. Its
  implicit output is the labels that appear once in sorted order (numpy's for ints; in
  order of first appearance where the labels do not compare, as an int and a string).
  :class:`Subscripts` holds the symbols and the legend back to the labels.

Ellipsis dimensions get internal labels (Greek letters, then Cyrillic ones) that are not
among the user's labels; that is how they print in a plan.

>>> eq = parse_equation("ij,jk", [(2, 3), (3, 4)])
>>> eq.subscripts
'ij,jk->ik'
>>> eq.sizes['j']
3
>>> parse_equation("...i,i->...", [(5, 2, 3), (3,)]).subscripts
'αβi,i->αβ'
>>> subs, _ = split_operands(([[1.0]], [0, 60], [[2.0]], [60, ("x", 1)]))
>>> subs, subs.legend
('AÈ,ÈÀ->AÀ', (('A', 0), ('È', 60), ('À', ('x', 1))))
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Hashable, Mapping, NamedTuple, Sequence

__all__ = ["Equation", "Subscripts", "parse_equation", "split_operands", "ellipsis_label",
           "symbol", "is_symbol", "interleaved_symbols", "LETTERS"]

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
"""numpy's labels, in the order of its sublist ints (0 -> 'A', 26 -> 'a')."""
_LETTER_SET = frozenset(LETTERS)
_GREEK = "αβγδεζηθικλμνξοπρστυφχψω"  # 24 letters, no final sigma
_FIRST_SYMBOL = 0xC0
"""The first code point past the letters that is a label (``chr(192)``, 'À'), as in
opt_einsum's ``get_symbol``."""
_SURROGATES = range(0xD800, 0xE000)
_MAX_SYMBOL_INDEX = len(LETTERS) + 0x110000 - _FIRST_SYMBOL - len(_SURROGATES)


def symbol(i: int) -> str:
    """The ``i``-th label character: numpy's letters for ``i < 52`` (:data:`LETTERS`), then
    the code points from U+00C0 on without the surrogates, as opt_einsum's ``get_symbol``
    goes on past its letters (``symbol(i) == get_symbol(i)`` for ``52 <= i < 55156``,
    where that one starts giving surrogates; ``symbol(52) == 'À'``)."""
    if i < len(LETTERS):
        return LETTERS[i]
    c = i - len(LETTERS) + _FIRST_SYMBOL
    return chr(c if c < _SURROGATES.start else c + len(_SURROGATES))


def is_symbol(c: str) -> bool:
    """Whether the character ``c`` is a label of the string form: an ASCII letter, or a code
    point from U+00C0 on that is not a surrogate."""
    return c in _LETTER_SET or (ord(c) >= _FIRST_SYMBOL and ord(c) not in _SURROGATES)


def _ellipsis_labels(n: int, taken) -> tuple[str, ...]:
    """``n`` internal labels for ellipsis dimensions, none of them in ``taken``."""
    out: list[str] = []
    i = 0
    while len(out) < n:
        lab = ellipsis_label(i)
        if lab not in taken:
            out.append(lab)
        i += 1
    return tuple(out)


def ellipsis_label(i: int) -> str:
    """The ``i``-th internal label of an ellipsis dimension (never an ASCII letter; those
    the user's labels take are skipped when an equation is parsed)."""
    if i < len(_GREEK):
        return _GREEK[i]
    c = 0x0410 + i - len(_GREEK)
    return chr(c if c < _SURROGATES.start else c + len(_SURROGATES))


class Subscripts(str):
    """Subscripts in symbols made from the interleaved form, with ``legend``: the
    (symbol, label) pairs of the labels a symbol does not spell (empty where every label is
    one of numpy's ints 0..51 or a one-character string that is its own symbol).

    It is the string of symbols everywhere a string goes (equal to it, hashed as it): the
    legend says how to print it, and is no part of what the contraction is.
    """

    legend: tuple[tuple[str, Hashable], ...]

    def __new__(cls, text: str = "", legend: tuple = ()):
        self = super().__new__(cls, text)
        self.legend = tuple(legend)
        return self

    def __reduce__(self):
        return (Subscripts, (str(self), self.legend))


@dataclass(frozen=True)
class Equation:
    """A parsed, validated einsum: one label tuple per operand (axis order), the output.

    ``sizes`` maps every label to its broadcast size; ``shapes`` are the operands' shapes
    as given. ``ellipsis`` holds the internal labels the ``...`` dimensions received.
    ``legend``: for the interleaved form, the (symbol, label) pairs of the labels a symbol
    does not spell (:class:`Subscripts`); empty otherwise.
    """

    inputs: tuple[tuple[str, ...], ...]
    output: tuple[str, ...]
    sizes: Mapping[str, int]
    shapes: tuple[tuple[int, ...], ...]
    ellipsis: tuple[str, ...] = ()
    legend: tuple[tuple[str, Any], ...] = field(default=(), compare=False)

    @property
    def subscripts(self) -> str:
        return ",".join("".join(t) for t in self.inputs) + "->" + "".join(self.output)

    def __str__(self) -> str:
        return self.subscripts


def _brief(x) -> str:
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def _sublist(sub: Any, where: str) -> list:
    """One subscripts list of the interleaved form as a list of labels and Ellipsis;
    TypeError for a string, a non-sequence or an unhashable label."""
    if isinstance(sub, (str, bytes)):
        raise TypeError(f"the subscripts of {where} must be a list or a tuple of labels, got "
                        f"the string {_brief(sub)} (the subscripts string goes first, "
                        "before the operands)")
    try:
        items = list(sub)
    except TypeError:
        raise TypeError(f"the subscripts of {where} must be a list or a tuple of labels "
                        f"(any hashable) and Ellipsis, got {type(sub).__name__} "
                        f"{_brief(sub)}") from None
    for s in items:
        try:
            hash(s)
        except TypeError:
            raise TypeError(f"einsum labels must be hashable: the subscripts of {where} "
                            f"hold the {type(s).__name__} {_brief(s)}") from None
    return items


def _int_label(lab: Any) -> int | None:
    """A label that is a non-negative int with a symbol of its own, as that int; else None."""
    if isinstance(lab, (str, bytes, float, complex)) or not hasattr(lab, "__index__"):
        return None
    try:
        i = operator.index(lab)
    except TypeError:
        return None
    return i if 0 <= i < _MAX_SYMBOL_INDEX else None


def interleaved_symbols(labels: Sequence[Hashable]) -> dict:
    """Each label -> its symbol: an int ``i`` from 0 on (numpy's 0..51 included) gets
    :func:`symbol` ``(i)``; a one-character string that is a label (:func:`is_symbol`)
    and no int's symbol gets itself; any other label, in order of first appearance, the
    lowest symbol from :func:`symbol` ``(52)`` on that no label took."""
    out: dict = {}
    taken: set[str] = set()
    for lab in labels:
        i = _int_label(lab)
        if i is not None and lab not in out:
            out[lab] = symbol(i)
            taken.add(out[lab])
    for lab in labels:
        if lab not in out and isinstance(lab, str) and len(lab) == 1 and is_symbol(lab) \
                and lab not in taken:
            out[lab] = lab
            taken.add(lab)
    nxt = len(LETTERS)
    for lab in labels:
        if lab not in out:
            while symbol(nxt) in taken:
                nxt += 1
            out[lab] = symbol(nxt)
            taken.add(out[lab])
            nxt += 1
    return out


def _implicit_output(terms: Sequence[Sequence[Any]]) -> list:
    """numpy's implicit output of the interleaved form: Ellipsis (where a term has one),
    then the labels that appear once, sorted (in order of first appearance where they do
    not compare)."""
    counts: dict = {}
    for t in terms:
        for lab in t:
            if lab is not Ellipsis:
                counts[lab] = counts.get(lab, 0) + 1
    singles = [lab for lab, c in counts.items() if c == 1]
    try:
        singles = sorted(singles)
    except TypeError:
        pass
    ell = [Ellipsis] if any(lab is Ellipsis for t in terms for lab in t) else []
    return ell + singles


def _interleaved(args: Sequence[Any]) -> tuple[Subscripts, list]:
    """The interleaved form ``(op0, sub0, op1, sub1, ..., [sub_out])`` -> (Subscripts,
    operands)."""
    rest = list(args)
    ops, terms = [], []
    while len(rest) >= 2:
        terms.append(_sublist(rest[1], f"operand {len(ops)}"))
        ops.append(rest[0])
        rest = rest[2:]
    output = _sublist(rest[0], "the output") if rest else _implicit_output(terms)
    labels = list(dict.fromkeys(lab for t in terms + [output] for lab in t
                                if lab is not Ellipsis))
    sym = interleaved_symbols(labels)

    def term(t):
        return "".join("..." if lab is Ellipsis else sym[lab] for lab in t)
    text = ",".join(term(t) for t in terms) + "->" + term(output)
    legend = ()
    if any(not (sym[lab] == lab or (_int_label(lab) is not None and _int_label(lab) < 52))
           for lab in labels):
        legend = tuple((sym[lab], lab) for lab in labels if sym[lab] != lab)
    return Subscripts(text, legend), ops


def split_operands(args: Sequence[Any]) -> tuple[str, list]:
    """``einsum``'s positional arguments -> (subscripts string, operands).

    Accepts ``(subscripts, *operands)`` and the interleaved sublist form
    ``(op0, sub0, op1, sub1, ..., [sub_out])``, whose labels may be any hashable: it
    comes back as :class:`Subscripts` (symbols, the output always explicit, and a legend).
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
    return _interleaved(args)


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
        if not is_symbol(c):
            raise ValueError(f"invalid subscript {c!r} in einstein sum subscripts string "
                             f"({where}), subscripts must be letters (ASCII letters, or "
                             "unicode characters from U+00C0 on)")


def _quote(subscripts: str) -> str:
    """``repr(subscripts)``, cut where a network's subscripts run long."""
    return _brief(str(subscripts))


def _arrow_error(detail: str, subscripts: str) -> ValueError:
    return ValueError("einstein sum subscript string does not contain proper '->' output "
                      f"specified: {detail} in {_quote(subscripts)}")


FORMS_KEPT = 1024
"""The subscripts forms (:func:`_form`) kept for reuse: a form depends on the subscripts and
the operands' numbers of dimensions only, so calls on new sizes reuse it."""


class _Form(NamedTuple):
    """What the subscripts say for given numbers of dimensions: each operand's labels, the
    output's (None where the output is invalid: ``output_error`` then says why, raised
    after the sizes are checked, as numpy reports a size error first), the internal labels
    of the ellipsis dimensions, and ``misfit``: the first (operand, term) whose labels do
    not fit its dimensions (the rest then unset)."""

    inputs: tuple[tuple[str, ...], ...]
    output: tuple[str, ...] | None
    ellipsis: tuple[str, ...]
    output_error: str | None = None
    misfit: tuple[int, str] | None = None


def parse_equation(subscripts: str, shapes: Sequence[Sequence[int]]) -> Equation:
    """Validate ``subscripts`` against the operands' ``shapes``; return the Equation.

    ``subscripts`` is a string, or the :class:`Subscripts` of the interleaved form
    (:func:`split_operands`), whose legend the Equation keeps and whose errors name the
    labels as given.
    """
    if not isinstance(subscripts, str):
        raise TypeError("einsum subscripts must be a string, got "
                        f"{type(subscripts).__name__}")
    legend = tuple(getattr(subscripts, "legend", ()))
    form = _form(str(subscripts), legend, tuple(map(len, shapes)))
    if form.misfit is not None:
        i, term = form.misfit
        raise _misfit_error(i, term, tuple(shapes[i]))
    shapes = tuple([tuple(map(int, s)) for s in shapes])
    sizes = _label_sizes(form, shapes, legend)
    if form.output is None:
        raise ValueError(form.output_error)
    return Equation(form.inputs, form.output, sizes, shapes, form.ellipsis, legend)


def _namer(ellipsis: Sequence[str], legend) -> Callable[[str], str]:
    """How an error names a label: an ellipsis dimension as one, an interleaved label as
    given (with its symbol)."""
    ell_set, names = frozenset(ellipsis), dict(legend)

    def show(lab: str) -> str:
        if lab in ell_set:
            return f"{lab!r} (an ellipsis dimension)"
        if lab in names:
            return f"{_brief(names[lab])} ({lab!r})"
        return repr(lab)
    return show


def _label_sizes(form: _Form, shapes, legend) -> dict[str, int]:
    """Each label's broadcast size over the operands' ``shapes``; ValueError where a
    diagonal's sizes differ or two sizes do not broadcast."""
    sizes: dict[str, int] = {}
    for labels, shape in zip(form.inputs, shapes):
        sizes.update(zip(labels, shape))
    size = sizes.__getitem__
    if all([tuple(map(size, labels)) == shape for labels, shape in zip(form.inputs, shapes)]):
        return sizes  # every operand has each label's one size (nothing broadcast)
    sizes = {}
    for i, (labels, shape) in enumerate(zip(form.inputs, shapes)):
        _operand_sizes(i, labels, shape, sizes, form, legend)
    return sizes


def _broadcast(lab: str, d: int, prev: int, i: int, shape, sizes, form: _Form, legend):
    """Operand ``i``'s size ``d`` of ``lab`` broadcast against the size ``prev`` of the
    operands before it, into ``sizes``; ValueError where neither is 1."""
    if prev == 1:
        sizes[lab] = d
    elif d != 1:
        raise ValueError(
            f"operands could not be broadcast together: size of label "
            f"{_namer(form.ellipsis, legend)(lab)} for operand {i} (shape {shape}) is {d}, "
            f"but it is {prev} in an earlier operand")


def _operand_sizes(i: int, labels, shape, sizes, form: _Form, legend) -> None:
    """Operand ``i``'s label sizes broadcast into ``sizes`` (those of the operands before
    it); ValueError where a label it repeats (a diagonal) has sizes that differ, or where a
    size does not broadcast."""
    seen: dict[str, int] = {}
    for lab, d in zip(labels, shape):
        if lab in seen:
            if seen[lab] != d:
                raise ValueError(
                    f"dimensions in operand {i} for collapsing index "
                    f"{_namer(form.ellipsis, legend)(lab)} don't match ({seen[lab]} != {d}); "
                    f"operand {i} has shape {shape}")
            continue
        seen[lab] = d
        prev = sizes.setdefault(lab, d)
        if prev != d:
            _broadcast(lab, d, prev, i, shape, sizes, form, legend)


@lru_cache(maxsize=FORMS_KEPT)
def _form(subscripts: str, legend: tuple, ndims: tuple[int, ...]) -> _Form:
    """The :class:`_Form` of ``subscripts`` over operands of ``ndims`` dimensions;
    ValueError for malformed subscripts or a term that does not fit its operand."""
    m = re.search(r"\.\s+\.", subscripts)
    if m:
        raise ValueError("einstein sum subscripts string contains a '.' that is not part of "
                         f"an ellipsis ('...'): a space (' ') inside an ellipsis at position "
                         f"{m.start() + 1} of {_quote(subscripts)}")
    m = re.search(r"-(?!>)|(?<!-)>", subscripts)
    if m:
        if re.search(r"-\s+>", subscripts):
            raise _arrow_error("a space (' ') inside '->'", subscripts)
        raise _arrow_error(f"a {m.group()!r} that is not part of '->' at position "
                           f"{m.start()}", subscripts)
    subs = subscripts.replace(" ", "")
    n_arrow = subs.count("->")
    if n_arrow > 1:
        raise _arrow_error("'->' appears more than once", subscripts)
    if n_arrow == 1:
        lhs, rhs = subs.split("->")
    else:
        lhs, rhs = subs, None
    if "," in (rhs or ""):
        raise ValueError(f"invalid subscript ',' in the output subscripts {_quote(rhs)} (only "
                         "the inputs are separated by commas)")
    terms = lhs.split(",")
    _check_count(len(terms), len(ndims), subscripts)
    split = []
    for i, (term, ndim) in enumerate(zip(terms, ndims)):
        where = f"operand {i}"
        head, ell, tail = _split_term(term, where)
        _check_labels(head + tail, where)
        named = len(head) + len(tail)
        if named > ndim or (ell is None and named != ndim):
            return _Form((), None, (), misfit=(i, term))
        split.append((head, tail, ndim - named if ell is not None else 0))
    n_ell = max((s[2] for s in split), default=0)
    ell_labels = _ellipsis_labels(n_ell, set(lhs) | set(rhs or ())) if n_ell else ()
    inputs = tuple(tuple(head) + ell_labels[n_ell - ne:] + tuple(tail)
                   for head, tail, ne in split)
    try:
        output = _output(inputs, rhs, ell_labels, subscripts, _namer(ell_labels, legend))
    except ValueError as e:
        return _Form(inputs, None, ell_labels, output_error=str(e))
    return _Form(inputs, output, ell_labels)


def _check_count(n_terms: int, n_ops: int, subscripts: str) -> None:
    """ValueError where the subscripts have other than one input term an operand."""
    if n_terms < n_ops:
        raise ValueError(f"more operands provided to einstein sum function than specified in "
                         f"the subscripts string ({n_ops} operands for {n_terms} terms "
                         f"in {_quote(subscripts)})")
    if n_terms > n_ops:
        raise ValueError(f"fewer operands provided to einstein sum function than specified in "
                         f"the subscripts string ({n_ops} operands for {n_terms} terms "
                         f"in {_quote(subscripts)})")


def _misfit_error(i: int, term: str, shape: tuple) -> ValueError:
    """The error of operand ``i``, whose ``term`` names more dimensions than its ``shape``
    has, or fewer without an ellipsis."""
    head, ell, tail = _split_term(term, f"operand {i}")
    named = len(head) + len(tail)
    if named > len(shape):
        return ValueError(f"einstein sum subscripts string contains too many subscripts for "
                          f"operand {i}: {term!r} names {named} dimensions, the operand has "
                          f"shape {shape}")
    return ValueError(f"operand has more dimensions than subscripts given in einstein sum, "
                      f"but no '...' ellipsis provided to broadcast the extra dimensions: "
                      f"operand {i} has shape {shape} for the subscripts {term!r}")


def _output(inputs, rhs: str | None, ell_labels, subscripts: str, show) -> tuple[str, ...]:
    """The output labels: ``rhs``'s, or the implicit output (the ellipsis dimensions, then
    the labels that appear once, in code point order); ValueError for an invalid ``rhs``."""
    if rhs is None:
        counts: dict[str, int] = {}
        for t in inputs:
            for lab in t:
                counts[lab] = counts.get(lab, 0) + 1
        ell_set = frozenset(ell_labels)
        singles = sorted(lab for lab, c in counts.items() if c == 1 and lab not in ell_set)
        return ell_labels + tuple(singles)
    head, ell, tail = _split_term(rhs, "the output")
    _check_labels(head + tail, "the output")
    known = {lab for t in inputs for lab in t}
    for lab in head + tail:
        if lab not in known:
            raise ValueError(f"einstein sum subscripts string included output subscript "
                             f"{show(lab)} which never appeared in an input")
    if ell is None and ell_labels:
        raise ValueError("output has more dimensions than subscripts given in einstein "
                         "sum, but no '...' ellipsis provided to broadcast the extra "
                         f"dimensions ({len(ell_labels)} ellipsis dimension(s) in the inputs "
                         f"of {_quote(subscripts)})")
    output = tuple(head) + (ell_labels if ell is not None else ()) + tuple(tail)
    seen_out = set()
    for lab in output:
        if lab in seen_out:
            raise ValueError(f"einstein sum subscripts string includes output subscript "
                             f"{show(lab)} multiple times")
        seen_out.add(lab)
    return output
