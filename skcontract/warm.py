"""The warm path of :func:`skcontract.einsum`: a call that repeats an earlier one's
subscripts, operand types, shapes, strides, dtypes and keywords skips the checks, the parse and
the plan lookup (:data:`WARM`), each of which depends only on what its key holds."""
from __future__ import annotations

from .semantics import caster, finish, view_call


WARM: dict = {}
"""The warm path of :func:`einsum`: a call's subscripts, operand types, shapes, strides and
dtypes and its keywords -> the rest of the call (:class:`WarmCall`), for calls without
``out`` on arrays of the backend's own type (so no torch operand, no copy to make) whose
``optimize`` is a name or a bool. A hit skips the checks, the parse and the plan lookup:
every one of them depends only on what the key holds."""


_WARM_MAX = 1024
"""Entries :data:`WARM` keeps before it starts again (distinct calls of a process)."""


_WARM_OPTIMIZE = (str, bool)


def call_key(operands, out, dtype, order, casting, optimize, memory_limit, backend,
              precision, conj=()):
    """The :data:`WARM` key of an einsum call, or None for a call the warm path does not
    take (``out``, the sublist form, an optimiser object, operands that are not arrays,
    ``conj`` other than a tuple or a list)."""
    if type(conj) is list:
        conj = tuple(conj)
    if out is not None or not operands or type(operands[0]) is not str or \
            type(optimize) not in _WARM_OPTIMIZE or type(conj) is not tuple or \
            any([type(i) is not int for i in conj]):  # (True and 1.0 hash as 1 does)
        return None
    try:
        ops = tuple([(type(a), a.shape, a.strides, a.dtype) for a in operands[1:]])
    except AttributeError:
        return None
    return (operands[0], ops, dtype, order, casting, optimize, memory_limit,
            type(memory_limit), backend, precision, conj)


def remember(warm_key, ops, bk, prepared, res, order, casting, view=None):
    """The rest of this call as :class:`WarmCall` makes it (``view``: the single operand's
    view this call returns, whose shape and strides every call of the key repeats), kept
    under ``warm_key`` when the operands are the backend's own arrays (not converted, no
    torch tensor)."""
    plan, run, allocates = prepared
    if view is not None:
        call = view_call(view.shape, view.strides, bk.xp)
    else:
        call = WarmCall(run, allocates, res, bk.compute_dtype(res), order, casting, bk.xp)
        if getattr(run, "resizable", False):  # a template's run: the plan's own on a repeat
            call.specialize = lambda: bk.compile(plan)
    if warm_key is not None and {bk.xp.ndarray}.issuperset(map(type, ops)):
        if len(WARM) >= _WARM_MAX:
            WARM.clear()
        WARM[warm_key] = call
    return call


class WarmCall:
    """What an einsum call does once its arrays are checked and its plan found: the plan's
    run on the arrays cast to the compute dtype, the result made as numpy would. (An
    instance, not a closure: one object for the collector where a closure is nine, and a
    first call on new shapes keeps one.)"""

    __slots__ = ("run", "allocates", "res", "cd", "order", "casting", "xp", "cast",
                 "specialize")

    def __init__(self, run, allocates, res, cd, order, casting, xp):
        self.run, self.allocates, self.res, self.cd = run, allocates, res, cd
        self.order, self.casting, self.xp, self.cast = order, casting, xp, caster(casting)
        self.specialize = None  # where run serves any sizes: how to make the plan's own

    def __call__(self, arrays):
        """A warm call: a run for any sizes (a re-sized plan's first call: :func:`prepare`)
        is swapped for the plan's own, faster a call, when the call repeats."""
        specialize = self.specialize
        if specialize is not None:
            self.specialize = None
            self.run = specialize()
        return self.once(arrays)

    def once(self, arrays):
        """The call on ``arrays`` with the run it holds."""
        cd, cast = self.cd, self.cast
        arrays_c = [a if a.dtype == cd else cast(a, cd) for a in arrays]
        return finish(self.run(arrays_c), arrays, self.res, self.allocates, None, self.order,
                       self.casting, self.xp)
