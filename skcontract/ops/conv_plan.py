"""A convolution's GPU plan: everything ``conv2d`` decides before it launches, as one frozen
value that prints as a table (:class:`ConvPlan`), made from shapes by :func:`plan_conv2d`.

The plan says which way the convolution runs (one GEMM over views for a pointwise
convolution, else the implicit GEMM on a family's im2col entry), which operands are read in
place and which are copied first (NHWC, channels zero-padded, filter rows folded into
channels), the bias, and the launch: a :class:`~skcontract.kernels.step_launch.StepLaunch`
(the schedule, the kernel specialisation, and for the implicit GEMM the geometry, input
strides and filter rows its ConvShape argument and TMA maps are made from), with the
arguments after the pointers. The GPU path (:mod:`.conv2d_gpu`) makes one plan for each
layout of its arrays and launches it through the one cache of bound launches
(:mod:`skcontract.kernels.bound`) without entering the resolver;
:func:`skcontract.explain_conv2d` prints the plan of dense arrays on any machine. Pure
Python: no CuPy.

>>> from skcontract.ops.conv2d import conv_geometry
>>> from skcontract.schedule import DeviceInfo
>>> g = conv_geometry((1, 512, 7, 7), (512, 512, 3, 3), padding=1)
>>> plan = plan_conv2d(g, "float16", DeviceInfo.h200(), ConvOperands.dense(g))
>>> plan.route, plan.input_copy, plan.launch.entry.IM2COL
('implicit GEMM', 'nhwc', 'tma')
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from ..kernels.catalogue import LINE_BYTES
from ..kernels.depthwise import plan_depthwise
from ..kernels.conv import (InputView, conv_step_launch, fold_runs_tile, folded_taps,
                            merged_groups, padded_channels, tma_channel_block, vectors_fit)
from ..kernels.operands import (Operand, as3, c_strides, canonical_strides, matrix_layout,
                                product_of)
from ..kernels.resolve import DEFAULT_REDUCTION, compute_capability, resolve_product
from ..kernels.specs import CXX_TYPES, VEC16_BYTES
from ..kernels.step_launch import StepLaunch
from ..plan.plan import UNPRICED_HINT

__all__ = ["ConvOperands", "ConvPlan", "plan_conv2d", "EMPTY", "BIAS_ONLY", "POINTWISE",
           "IMPLICIT_GEMM", "DEPTHWISE"]

EMPTY = "empty"
"""The route of a convolution whose output is empty: nothing runs."""
BIAS_ONLY = "bias only"
"""The route of a convolution with no input channels a group: the output is the bias (or
zeros), and nothing is launched."""
POINTWISE = "pointwise GEMM"
"""The route of a pointwise convolution of a dense input: one GEMM (or Dot) launch over views
of the input and the output in their own layout (a short-rowed channels-last input: rows of
several pixels, with a block-diagonal copy of the filters before and a fix-up launch after,
:func:`pointwise_packed_pixels`)."""
IMPLICIT_GEMM = "implicit GEMM"
"""The route of every other convolution: the implicit GEMM on a family's im2col entry."""
DEPTHWISE = "depthwise direct"
"""The route of a depthwise convolution (one filter a channel): the direct kernel, which
reads the input and writes the output in place in their own layouts
(:mod:`skcontract.kernels.depthwise`)."""


class ConvOperands(NamedTuple):
    """How a call's arrays lie, as far as the plan depends on it: the input's (N, C, H, W)
    strides in elements (an unbatched input as a batch of one), the weight's (K, C / groups,
    R, S) strides, each array's address modulo :data:`~skcontract.kernels.catalogue.LINE_BYTES`
    (its 16-byte alignment, and whether its rows start off the L2's lines), and whether a
    bias is added. An axis of one element is never stepped over, so its stride is 0 here
    whatever the array's (:meth:`canonical`): arrays that differ only there, such as a
    channels-last copy of (1, C, 1, 1) filters and the dense channels-last layout, are
    one layout and get one plan."""

    input_strides: tuple[int, int, int, int]
    input_offset: int
    weight_strides: tuple[int, int, int, int]
    weight_offset: int
    bias: bool

    @classmethod
    def dense(cls, g, channels_last: bool = False, bias: bool = False) -> "ConvOperands":
        """Freshly allocated operands of convolution ``g``: contiguous NCHW input and
        (K, C / groups, R, S) weight, or both channels-last (torch's
        ``memory_format=torch.channels_last``)."""
        cg = g.c // g.groups
        if channels_last:
            ops = cls((g.h * g.w * g.c, 1, g.w * g.c, g.c), 0,
                      (g.r * g.s * cg, 1, g.s * cg, cg), 0, bias)
        else:
            ops = cls((g.c * g.h * g.w, g.h * g.w, g.w, 1), 0,
                      (cg * g.r * g.s, g.r * g.s, g.s, 1), 0, bias)
        return ops.canonical(g)

    @classmethod
    def of(cls, x, weight, bias: bool) -> "ConvOperands":
        """The operands of described arrays (:func:`skcontract.kernels.operands.describe`):
        ``x`` the 4-D input, ``weight`` the filters."""
        return cls(canonical_strides(x.shape, x.strides), x.ptr % LINE_BYTES,
                   canonical_strides(weight.shape, weight.strides), weight.ptr % LINE_BYTES,
                   bias)

    def canonical(self, g) -> "ConvOperands":
        """These operands of convolution ``g`` with the stride of every axis of one element
        (or none) 0."""
        return self._replace(
            input_strides=canonical_strides((g.n, g.c, g.h, g.w), self.input_strides),
            weight_strides=canonical_strides((g.k, g.c // g.groups, g.r, g.s), self.weight_strides))


@dataclass(frozen=True)
class ConvPlan:
    """What the GPU runs for a convolution (see the module). ``geometry``: the checked call
    (a ConvGeometry); ``operands``: how its arrays lie; ``route``: :data:`EMPTY`,
    :data:`BIAS_ONLY`, :data:`POINTWISE` or :data:`IMPLICIT_GEMM`; ``channels_last``: the
    input is dense channels-last, and so is the result; ``input_copy`` / ``filter_copy``:
    None where the array is read in place, else the copy made first ("nhwc": NHWC;
    "krsc": (K, R, S, C / groups); "padded": channels zero-padded to ``run_geometry.c``;
    "folded": :attr:`fold`'s copies; "contiguous": the pointwise GEMM's C x K filters;
    "block-diagonal": the pointwise GEMM's K x C filters repeated down the diagonal of a
    (``packed`` K) x (``packed`` C) copy; "padded or folded": a plan for no device, where the
    GPU decides); ``packed``: the pixels a row of a pointwise GEMM's A reads;
    ``run_geometry``: the convolution the im2col kernel runs; ``fold``: the folded taps
    (:class:`~skcontract.kernels.conv.FoldedTaps`) or None; ``launch``: the StepLaunch
    (None where nothing launches, or for no device); ``args``: the launch's arguments after
    the three pointers (an im2col launch's ConvShape comes from ``launch.conv``);
    ``swapped``: the kernel's A is the filters and B the input (a pointwise NCHW product,
    computed transposed, or a Dot form in that order); ``fallback``: why the plan leaves out
    an entry this device could not build as declared; ``direct``: the direct kernel's launch
    of the :data:`DEPTHWISE` route (:class:`~skcontract.kernels.depthwise.DepthwiseLaunch`),
    made with or without a device."""

    geometry: Any
    dtype: str
    device: Any
    operands: ConvOperands
    mode: str = "auto"
    reduction: str = DEFAULT_REDUCTION
    tile: tuple | None = None
    grid: int | None = None
    route: str = IMPLICIT_GEMM
    channels_last: bool = False
    input_copy: str | None = None
    filter_copy: str | None = None
    run_geometry: Any = None
    fold: Any = None
    launch: StepLaunch | None = None
    args: tuple = ()
    swapped: bool = False
    fallback: str | None = None
    exclude: frozenset = frozenset()
    direct: Any = None
    packed: int = 1
    merged: int = 1

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        """The result's (N, K, P, Q)."""
        g = self.geometry
        return g.n, g.k, g.p, g.q

    @property
    def beta(self) -> float:
        """The epilogue's beta: 1 where the bias is written into the output first."""
        return 1.0 if self.operands.bias else 0.0

    @property
    def gemm_sizes(self) -> tuple[int, int, int, int]:
        """The convolution's GEMM as (batch, M, N, K): groups, N P Q output pixels, K / groups
        output channels, C / groups R S taps of input channels."""
        g = self.geometry
        return (g.groups, g.n * g.p * g.q, g.k // g.groups,
                (g.c // g.groups) * g.r * g.s)

    @property
    def flops(self) -> int:
        """The convolution's multiply-adds, twice: 2 N P Q K (C / groups) R S."""
        batch, m, n, k = self.gemm_sizes
        return 2 * batch * m * n * k

    @property
    def workspace_bytes(self) -> int:
        """Bytes of fixup workspace, staging and locks the launch uses (0 without one)."""
        if self.launch is None:
            return 0
        s, spec = self.launch.schedule, self.launch.spec
        slots = (s.workspace_slots + s.staging_slots) * spec.slot_elems * spec.acc_bytes
        return slots + s.num_locks * spec.entry.CLUSTER * 4

    @property
    def copied_elements(self) -> int:
        """Elements of the copies made before the launch (input, filters) and after it (an
        NCHW result of the implicit GEMM)."""
        return sum(r[3] for r in self._rows() if r[0] == "copy")

    def summary(self) -> str:
        """The plan as text: the call, the GEMM, the route and why, a table of what runs
        in order (copies, the bias, the launch with its schedule and kernel, the result),
        the workspace."""
        g = self.geometry
        layout = "channels-last" if self.channels_last else "NCHW"
        ops = self.operands
        head = (f"conv2d {self.dtype}: input {(g.n, g.c, g.h, g.w)} {layout}, weight "
                f"{(g.k, g.c // g.groups, g.r, g.s)}{', bias' if ops.bias else ''}; stride "
                f"{g.stride}, padding {g.padding}, dilation {g.dilation}, groups {g.groups} -> "
                f"{self.output_shape} {layout}")
        if self.device is not None:
            head += f"; what the GPU launches on {self.device.name}"
        sizes = self.gemm_sizes
        gemm = ("as a GEMM: batch (groups) {:,}, M (N*P*Q) {:,}, N (K/groups) {:,}, K "
                "(C/groups*R*S) {:,}".format(*sizes) + f"; {self.flops:,} FLOPs")
        if self.launch is not None:
            q = self.launch.schedule.problem
            if (q.batch, q.m, q.n, q.k) != sizes:
                gemm += (f"; the kernel runs batch {q.batch}, M {q.m:,}, N {q.n:,}, K "
                         f"{q.k:,}")
        header = ("#", "operation", "operand", "elements", "what")
        rows = [header] + [(str(i), op, who, f"{n:,}" if n else "-", what)
                           for i, (op, who, what, n) in enumerate(self._rows())]
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        table = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        tail = [f"workspace: {self.workspace_bytes:,} bytes of fixup workspace and locks; "
                f"{self.copied_elements:,} elements copied"]
        if self.fallback:
            tail.append(f"fallback: {self.fallback}")
        if self.device is None and self.route in (POINTWISE, IMPLICIT_GEMM):
            tail.append(UNPRICED_HINT)
        return "\n".join([head, gemm, f"route: {self._reason()}", *table, *tail])

    __str__ = summary

    def __repr__(self) -> str:
        return self.summary()

    # ---- the table ----------------------------------------------------------------------
    def _launch_text(self) -> str:
        if self.launch is not None:
            return self.launch.summary()
        return "- (no GPU schedules priced)"

    def _rows(self) -> list[tuple[str, str, str, int]]:
        """(operation, operand, what, elements) in the order they run."""
        g, rows = self.geometry, []
        out_elems = g.n * g.k * g.p * g.q
        if self.route == EMPTY:
            return [("alloc", "output", f"empty {self.output_shape}: nothing runs", 0)]
        if self.route == POINTWISE:
            rows += self._pointwise_operand_rows()
        elif self.route == IMPLICIT_GEMM:
            rows += self._im2col_operand_rows()
        elif self.route == DEPTHWISE:
            rows += [("read", "input", "in place, at its strides", 0),
                     ("read", "weight", "in place, at its strides", 0)]
        # the implicit GEMM writes NHWC; a pointwise product and the depthwise kernel write
        # the input's layout
        nhwc = self.route not in (POINTWISE, DEPTHWISE) or self.channels_last
        shape = (g.n, g.p, g.q, g.k) if nhwc else self.output_shape
        fmt = "NHWC" if nhwc else "NCHW"
        if self.operands.bias and self.route == DEPTHWISE:
            rows.append(("alloc", "output", f"{fmt} {shape} (the kernel adds the bias)", 0))
        elif self.operands.bias:
            beta = "" if self.route == BIAS_ONLY else " (beta = 1)"
            rows.append(("fill", "output", f"bias into the {fmt} {shape} output{beta}",
                         out_elems))
        elif self.route == BIAS_ONLY:
            rows.append(("fill", "output", f"zeros into the {fmt} {shape} output", out_elems))
        else:
            rows.append(("alloc", "output", f"{fmt} {shape}", 0))
        if self.route in (POINTWISE, IMPLICIT_GEMM):
            rows.append(("launch", "-", self._launch_text(), 0))
        elif self.route == DEPTHWISE:
            rows.append(("launch", "-", self.direct.summary(), 0))
        if self.packed > 1:
            tail = g.n * g.h * g.w % self.packed
            rows.append(("launch", "-", f"packed_fix: the input read again, the pixels of "
                         f"each row holding a non-finite channel and the {tail} after the "
                         "last whole row computed from it and the filters", 0))
        if nhwc and not self.channels_last:
            rows.append(("copy", "output", f"NHWC -> NCHW {self.output_shape}", out_elems))
        else:
            what = "as its (N, K, P, Q) view" if nhwc else "as it is"
            rows.append(("return", "output", what, 0))
        return rows

    def _pointwise_operand_rows(self) -> list[tuple[str, str, str, int]]:
        g, pp = self.geometry, self.packed
        if pp > 1:
            return [("read", "input", f"in place as the (N H W / {pp}) x {pp} C matrix, "
                     f"rows of {pp} pixels", 0),
                    ("copy", "weight", f"K x C filters {pp} times down the diagonal of a "
                     f"{pp} K x {pp} C copy, zeros elsewhere {(pp * g.k, pp * g.c)}",
                     pp * g.k * pp * g.c)]
        if not self.channels_last:
            rows = [("read", "input", "in place as N (H W) x C matrices, column-major (each "
                     "image's C x (H W))", 0)]
        else:
            later = packable_pixels(g, self.dtype, True) if self.device is None else None
            note = "" if later is None else (f" (a device of compute capability "
                                             f"{POINTWISE_PACK_CC // 10}.{POINTWISE_PACK_CC % 10}"
                                             f" reads rows of {later} pixels)")
            rows = [("read", "input", f"in place as the (N H W) x C matrix{note}", 0)]
        if self.filter_copy is None:
            rows.append(("read", "weight", "in place as its C x K transpose", 0))
        else:
            rows.append(("copy", "weight", f"C x K contiguous {(g.c, g.k)}", g.c * g.k))
        return rows

    def _im2col_operand_rows(self) -> list[tuple[str, str, str, int]]:
        g, run, fold = self.geometry, self.run_geometry, self.fold
        cg = g.c // g.groups
        if self.input_copy is None:
            view = self.launch.conv.strides if self.launch is not None else None
            strides = "" if view is None else f" (image, row, pixel strides {view})"
            rows = [("read", "input", f"in place, channels contiguous{strides}", 0)]
        elif self.input_copy == "nhwc":
            rows = [("copy", "input", f"NCHW -> NHWC {(g.n, g.h, g.w, g.c)}",
                     g.n * g.h * g.w * g.c)]
        elif self.input_copy == "padded":
            rows = [("copy", "input", f"NHWC, channels zero-padded to {run.c} "
                     f"{(g.n, g.h, g.w, run.c)}", g.n * g.h * g.w * run.c)]
        elif self.input_copy == "folded":
            rows = [("copy", "input", f"rows of {fold.width} pixels of {fold.channels} "
                     f"channels, zeros around the image {(g.n, g.h, fold.width, fold.channels)}"
                     f"; read through a view whose column q starts at pixel {fold.step}q",
                     g.n * g.h * fold.width * fold.channels)]
        else:
            rows = [("copy", "input", f"NHWC, channels zero-padded to "
                     f"{padded_channels(g, self.dtype)} (or folded into filter rows: the "
                     "GPU decides)", 0)]
        if self.filter_copy is None:
            ldb = "" if self.launch is None else f", {self.launch.conv.ldb} elements apart"
            rows.append(("read", "weight", f"in place as (K, R, S, C/groups) rows{ldb}", 0))
        elif self.filter_copy == "krsc":
            rows.append(("copy", "weight", f"(K, C/groups, R, S) -> (K, R, S, C/groups) "
                         f"{(g.k, g.r, g.s, cg)}", g.k * g.r * g.s * cg))
        elif self.filter_copy == "padded":
            rows.append(("copy", "weight", f"(K, R, S, C), channels zero-padded to {run.c} "
                         f"{(g.k, g.r, g.s, run.c)}", g.k * g.r * g.s * run.c))
        elif self.filter_copy == "merged":
            cm = run.c // run.groups
            rows.append(("copy", "weight", f"(K, C/groups, R, S) -> (K, R, S, {cm}): "
                         f"{self.merged} groups' channels merged, each output channel's at its "
                         f"group's place, zeros at the others' {(g.k, g.r, g.s, cm)}",
                         g.k * g.r * g.s * cm))
        elif self.filter_copy == "folded":
            rows.append(("copy", "weight", f"(K, R, 1, taps x channels): a row's {g.s} taps "
                         f"then channels, zeros to {run.c} {(g.k, g.r, 1, run.c)}",
                         g.k * g.r * run.c))
        else:
            rows.append(("copy", "weight", "(K, R, S, C) with the input's padded channels", 0))
        return rows

    def _reason(self) -> str:
        g = self.geometry
        if self.route == EMPTY:
            return "the output is empty"
        if self.route == BIAS_ONLY:
            return ("no input channels a group: the output is the bias" if
                    self.operands.bias else "no input channels a group: the output is zeros")
        if self.route == DEPTHWISE:
            return ("depthwise (one filter a channel): memory-bound, each output element "
                    "summed from its taps by the direct kernel, no im2col")
        if self.route == POINTWISE:
            over = (f"rows of {self.packed} pixels and block-diagonal filters"
                    if self.packed > 1 else "views in its layout")
            text = ("pointwise (1x1 filters, stride 1, no padding, one group) of a dense "
                    f"{'channels-last' if self.channels_last else 'NCHW'} input: one "
                    f"product over {over}, no im2col")
            if self.launch is not None and self.launch.form is not None:
                text += "; memory-bound: the Dot family"
            elif self.swapped:
                text += "; the NCHW product runs transposed (K x H W, out column-major)"
            return text
        text = "implicit GEMM on a family's im2col entry"
        if self.launch is not None:
            spec = self.launch.spec
            how = ("A by TMA im2col loads, k padded to whole channel blocks a tap"
                   if spec.entry.IM2COL == "tma" else
                   f"A gathered by the CTA's threads, "
                   f"{'16-byte vectors' if spec.a_vec > 1 else 'element copies'}")
            text = f"implicit GEMM on the {spec.entry.FAMILY} family's im2col entry: {how}"
        if self.fold is not None:
            text += (f"; few channels: each filter row's {g.s} taps folded into channels "
                     f"(K {self.run_geometry.problem(self.dtype).k:,}, not "
                     f"{g.problem(self.dtype, tma_channel_block(self.dtype)).k:,} for a "
                     "block a tap)")
        elif self.input_copy == "padded":
            text += f"; few channels, zero-padded to {self.run_geometry.c} (16-byte vectors)"
        return text


class _View(NamedTuple):
    """A matrix operand of a product: shape and strides in elements (2-D, or 3-D with the
    batch first), its address modulo LINE_BYTES (0: a fresh allocation)."""

    shape: tuple
    strides: tuple
    offset: int = 0


def _itemsize(dtype: str) -> int:
    return CXX_TYPES[dtype][1]


def _matmul_launch(dtype: str, device, a: _View, b: _View, c: _View, beta: float, *, mode,
                   reduction, tile, grid, exclude=frozenset()):
    """The launch of ``c = a @ b + beta * c`` as :func:`skcontract.kernels.gemm.gemm` plans
    views of these strides and addresses: an operand no kernel reads as it lies (no unit
    inner stride, or a negative stride) copied C-contiguous first, a column-major ``c``
    computed transposed (``c^T = b^T a^T``), the product's
    :class:`~skcontract.kernels.operands.Product` planned by
    :func:`~skcontract.kernels.resolve.resolve_product` (the Dot family for a memory-bound
    product under auto with no tile or grid; no float32 precision: the exact entries).
    Returns ``(launch, args, swapped, copies)``: the arguments after the pointers, whether
    the kernel's A is ``b``, and which of ``a``, ``b`` are copied first."""
    copies = tuple(not _reads_as_it_lies(v) for v in (a, b))
    a, b = (_View(v.shape, c_strides(v.shape)) if copied else v
            for v, copied in zip((a, b), copies))
    order = (0, 1)  # the caller's operands (a: 0, b: 1) as the product's x and y
    _, (_, _, scn) = as3(c.shape, c.strides)
    n = b.shape[-1]
    if not (scn == 1 or n == 1):  # c^T (n x m, row-major) = b^T a^T
        a, b, c, order = _transposed(b), _transposed(a), _transposed(c), (1, 0)
    x, y = (Operand(v.offset, v.shape, v.strides, dtype, 0) for v in (a, b))
    _, out_strides = as3(c.shape, c.strides)
    product = product_of(x, y, out_strides)
    launch = resolve_product(product, device, precision=None, exclude=exclude,
                             dot=mode == "auto" and tile is None and grid is None, pad=False,
                             mode=mode, reduction=reduction, tile=tile, grid=grid)
    if any(launch.copies):
        raise AssertionError(f"conv2d: {launch.spec.name} copies operands K-major, which "
                             "no exact entry does")
    form = launch.form
    if form is not None:  # the Dot kernel's A and B in the form's order
        mm, nn = (form.outputs, 1) if form.shape == "rows" else (1, form.outputs)
        args = (mm, nn, form.k, form.lda, form.ldb, form.ldc, form.sa, form.sb, form.sc,
                1.0, beta)
        return launch, args, order[form.swap] == 1, copies
    (ba, m, k), (sba, sam, sak) = as3(x.shape, x.strides)
    (bb, _, n), (sbb, sbk, sbn) = as3(y.shape, y.strides)
    batch = max(ba, bb)
    sba, sbb = (0 if ba == 1 else sba), (0 if bb == 1 else sbb)
    (_, lda), (_, ldb) = matrix_layout(m, k, sam, sak), matrix_layout(k, n, sbk, sbn)
    sbc, scm, _ = out_strides
    args = (m, n, k, lda, ldb, scm if m > 1 else 0, sba, sbb, sbc if batch > 1 else 0, 1.0,
            beta)
    return launch, args, order[0] == 1, copies


def _reads_as_it_lies(v: _View) -> bool:
    """Whether a kernel reads matrix operand ``v`` as it lies: a unit inner stride (or a
    single row or column) and no negative stride."""
    (_, rows, cols), (sb, sr, sc) = as3(v.shape, v.strides)
    return (cols == 1 or sc == 1 or rows == 1 or sr == 1) and min(sb, sr, sc) >= 0


def _transposed(v: _View) -> _View:
    """``v`` with its last two axes swapped."""
    return v._replace(shape=(*v.shape[:-2], v.shape[-1], v.shape[-2]),
                      strides=(*v.strides[:-2], v.strides[-1], v.strides[-2]))


# ---- the layouts of the caller's arrays ----------------------------------------------------
def _dense(shape, strides, order) -> bool:
    """Whether an array is dense with its axes ``order`` from outermost to innermost (axes of
    one element may have any stride)."""
    want = 1
    for axis in reversed(order):
        if shape[axis] > 1 and strides[axis] != want:
            return False
        want *= shape[axis]
    return True


def dense_nhwc(shape, strides) -> bool:
    """A dense NHWC layout that is not also dense NCHW (as the CPU path's rule)."""
    return _dense(shape, strides, (0, 2, 3, 1)) and not _dense(shape, strides, (0, 1, 2, 3))


def _is_pointwise(g) -> bool:
    """1 x 1 filters, stride 1, no padding, one group: each output pixel is the filters'
    product with that input pixel's channels."""
    return (g.r, g.s, g.stride, g.padding, g.groups) == (1, 1, (1, 1), (0, 0, 0, 0), 1)


def _pointwise_rows_fit(shape, strides, g, channels_last: bool, elem: int) -> bool:
    """Whether a pointwise convolution's input is read in place as the GEMM's A with rows
    of whole 16-byte vectors (as the im2col path's NHWC copy would give them): a dense
    channels-last input of C channels a pixel, or a dense NCHW one of H x W pixels a
    channel."""
    if channels_last:
        return (g.c * elem) % VEC16_BYTES == 0
    return _dense(shape, strides, (0, 1, 2, 3)) and (g.h * g.w * elem) % VEC16_BYTES == 0


def _filter_rows(shape, strides) -> int | None:
    """The elements between two output channels' filters when each filter's (R, S, C/groups)
    is dense with the channels fastest (read in place); None when the filters need a copy."""
    k, cg, r, s = shape
    sk, sc, sr, ss = strides
    dense = all(size <= 1 or st == want for size, st, want in (
        (cg, sc, 1), (s, ss, cg), (r, sr, s * cg)))
    if not dense:
        return None
    return sk if k > 1 else r * s * cg


def _stride(shape, strides, axis: int) -> int:
    """An axis' stride in elements, 0 for an axis of one element (never stepped over)."""
    return strides[axis] if shape[axis] > 1 else 0


# ---- planning --------------------------------------------------------------------------------
def plan_conv2d(g, dtype: str, device, operands: ConvOperands, *, mode: str = "auto",
                reduction: str = DEFAULT_REDUCTION, tile=None, grid=None,
                exclude: frozenset = frozenset(), fallback: str | None = None) -> ConvPlan:
    """The GPU plan of convolution ``g`` (a checked ConvGeometry) of ``dtype`` arrays laid
    out as ``operands`` (held as :meth:`ConvOperands.canonical` gives them) on ``device``
    (a DeviceInfo; None: a plan without schedules, which says what it cannot decide without
    one), with ``conv2d``'s ``mode``, ``reduction``, ``tile`` and ``grid``. ``exclude``:
    GEMM entries a pointwise convolution is not planned on (a kernel this device cannot
    build as declared), ``fallback`` the reason shown. ValueError and TypeError as the
    resolver raises them (a tile no entry has, no kernel for the dtype)."""
    tile = None if tile is None else tuple(tile)
    operands = operands.canonical(g)
    shape = (g.n, g.c, g.h, g.w)
    strides = tuple(operands.input_strides)
    plan = ConvPlan(g, dtype, device, operands, mode, reduction, tile, grid,
                    channels_last=dense_nhwc(shape, strides), exclude=frozenset(exclude),
                    fallback=fallback)
    if 0 in plan.output_shape:
        return replace(plan, route=EMPTY)
    if g.c // g.groups == 0:
        return replace(plan, route=BIAS_ONLY)
    if _is_pointwise(g) and _pointwise_rows_fit(shape, strides, g, plan.channels_last,
                                                _itemsize(dtype)):
        return _pointwise(plan)
    direct = plan_depthwise(g, dtype, plan.channels_last, strides, operands.input_offset)
    if direct is not None and tile is None and grid is None and mode == "auto":
        return replace(plan, route=DEPTHWISE, direct=direct)
    return _implicit(plan)


POINTWISE_ROW_BYTES = 128
"""A pointwise convolution's channels-last input is the GEMM's A, one K-major row a pixel,
which the Wgmma kernels load by TMA a k-tile of this many bytes a row. Rows of a few
channels loaded far below the copy bandwidth on the H100, so such an input is read as
rows of as many pixels as fit this (:func:`pointwise_packed_pixels`)."""
POINTWISE_PACK_MAX_ROW_BYTES = 48
"""The longest pixel row (C channels' bytes) read as rows of several pixels: on the H100,
rows of 16, 32 and 48 bytes ran 1.4 - 1.8x faster so (64 x 24 x 56 x 56 -> 144: 75.6 us
one pixel a row, 42.0 us two, the launches around it included), rows of 64 bytes no
faster or slower by layer (docs/benchmarks/log.md, fifteenth session)."""
POINTWISE_PACK_MIN_BYTES = 2 * 2**20
"""The smallest input read as rows of several pixels: the filters' block-diagonal copy and
the fix-up launch cost about 4 us on the H100 whatever the size, which an input of 0.4 MB
did not win back (1 x 16 x 112 x 112 -> 96: 3.4 us one pixel a row, 7.5 us packed) and
one of 3.2 MB did (64 x 8 x 56 x 56 -> 64: 25.0 against 16.1 us)."""


POINTWISE_PACK_CC = 90
"""The compute capability whose Wgmma kernels the packed rows were measured on (the H100)."""


def pointwise_packed_pixels(g, dtype: str, channels_last: bool, device) -> int | None:
    """The pixels P a row of a pointwise convolution's GEMM reads on ``device``, or None for
    one a row: :func:`packable_pixels` on a device of compute capability
    :data:`POINTWISE_PACK_CC`.

    A dense channels-last input of N H W pixels of C channels is also (N H W / P) rows of
    P C channels, and its output (N H W / P) rows of P K channels: the GEMM of those rows
    with the filters' C x K block repeated P times down a diagonal computes the
    convolution. The GEMM's rows are one k-tile either way: the P-fold product costs no
    more k-tiles, only P times the columns. The pixels after the last whole row, and the
    rows holding a non-finite channel (which meets the other pixels' zeros), are computed
    again after the GEMM (:mod:`~skcontract.kernels.pointwise_packed`)."""
    if device is None or compute_capability(device) != POINTWISE_PACK_CC:
        return None
    return packable_pixels(g, dtype, channels_last)


def packable_pixels(g, dtype: str, channels_last: bool) -> int | None:
    """P, the most pixels whose channels fit :data:`POINTWISE_ROW_BYTES`, for a dense
    channels-last 16-bit input of 8, 16 or 24 channels (rows of 16-byte vectors, at most
    :data:`POINTWISE_PACK_MAX_ROW_BYTES`: P = 8, 4, 2) and at least
    :data:`POINTWISE_PACK_MIN_BYTES`; else None."""
    elem = _itemsize(dtype)
    row = g.c * elem
    if not channels_last or elem != 2 or row > POINTWISE_PACK_MAX_ROW_BYTES \
            or row % VEC16_BYTES or g.n * g.h * g.w * row < POINTWISE_PACK_MIN_BYTES:
        return None
    return POINTWISE_ROW_BYTES // row


def _pointwise(plan: ConvPlan) -> ConvPlan:
    """A pointwise convolution as one product, out[pixels, k] = x[pixels, c] @ w[c, k], over
    views in the caller's layouts: a channels-last input is (N H W) x C row-major and its
    output (N H W) x K; an NCHW one is, per image, C x (H W) read as its (H W) x C
    column-major transpose, and its output (H W) x K column-major, so the output is NCHW.
    The filters (K, C, 1, 1) are read as their C x K transpose, copied contiguous when
    neither stride is 1. A channels-last 16-bit input of short rows on 16 bytes is read as
    rows of ``packed`` pixels against a block-diagonal copy of the filters
    (:func:`pointwise_packed_pixels`), unless a tile or a grid is forced (they name the
    product of one pixel a row). A forced ``tile`` names
    (pixels, output channels); the NCHW product is computed transposed, so the tile is
    swapped to match."""
    g, ops = plan.geometry, plan.operands
    n, c, hw, k = g.n, g.c, g.h * g.w, g.k
    sk, sc = ops.weight_strides[0], ops.weight_strides[1]
    filters = _View((c, k), (sc, sk), ops.weight_offset)
    filter_copy = None
    if c > 1 and k > 1 and 1 not in (sc, sk):
        filters, filter_copy = _View((c, k), (k, 1)), "contiguous"
    tile = plan.tile
    if tile is not None and not plan.channels_last:
        tile = (tile[1], tile[0], *tile[2:])
    packed = None if plan.tile is not None or plan.grid is not None else \
        pointwise_packed_pixels(g, plan.dtype, plan.channels_last, plan.device)
    if packed is not None and ops.input_offset % VEC16_BYTES == 0:  # short rows, in place
        plan = replace(plan, packed=packed)
        rows, pc, pk = n * hw // packed, packed * c, packed * k
        filters, filter_copy = _View((pc, pk), (1, pc)), "block-diagonal"
        a, out = _View((rows, pc), (pc, 1), ops.input_offset), _View((rows, pk), (pk, 1))
    elif plan.channels_last:
        a, out = _View((n * hw, c), (c, 1), ops.input_offset), _View((n * hw, k), (k, 1))
    else:
        a = _View((n, hw, c), (c * hw, 1, hw), ops.input_offset)
        out = _View((n, hw, k), (k * hw, 1, hw))
    plan = replace(plan, route=POINTWISE, filter_copy=filter_copy)
    if plan.device is None:
        return plan
    launch, args, swapped, copies = _matmul_launch(
        plan.dtype, plan.device, a, filters, out, plan.beta, mode=plan.mode,
        reduction=plan.reduction, tile=tile, grid=plan.grid, exclude=plan.exclude)
    if copies[0]:
        raise AssertionError(f"conv2d: a pointwise input view {a} needs no copy")
    return replace(plan, filter_copy="contiguous" if copies[1] and filter_copy is None
                   else filter_copy, launch=launch, args=args, swapped=swapped)


def _implicit(plan: ConvPlan, merge: bool = True) -> ConvPlan:
    """The implicit GEMM: the copies the input and the filters need (few channels padded or
    folded, an NCHW input to NHWC, filters whose (R, S, C / groups) is not dense to
    (K, R, S, C / groups), groups of few channels merged where ``merge``:
    :func:`~skcontract.kernels.conv.merged_groups`), and the launch on the im2col entry."""
    g, dtype, device = plan.geometry, plan.dtype, plan.device
    cp = padded_channels(g, dtype)
    plan = replace(plan, route=IMPLICIT_GEMM)
    if cp is not None and device is None:
        return replace(plan, input_copy="padded or folded", filter_copy="padded or folded")
    fold = folded_taps(g, dtype, device) if cp is not None else None
    if fold is not None and plan.tile is not None and \
            not fold_runs_tile(fold, dtype, device, plan.tile):
        fold = None
    merged = merged_groups(g, dtype, device) if merge and cp is None and plan.tile is None \
        and plan.grid is None else None
    view = _implicit_view(plan, cp, fold, merged)
    plan = replace(plan, input_copy=view.copies[0], filter_copy=view.copies[1],
                   run_geometry=view.run, fold=fold, merged=merged or 1)
    if device is None:
        return plan
    a_vec, b_vec = vectors_fit(view.run, dtype, InputView(view.x_off, *view.strides),
                               view.w_off, view.ldb)
    try:
        launch = conv_step_launch(view.run, dtype, device, strides=view.strides, ldb=view.ldb,
                                  a_vec16=a_vec, b_vec16=b_vec,
                                  extent=None if fold is None else fold.extent,
                                  merged=plan.merged, mode=plan.mode, reduction=plan.reduction,
                                  tile=plan.tile, grid=plan.grid)
    except ValueError:
        if merged is None:
            raise
        return _implicit(plan, merge=False)  # no merged launch for this schedule: apart
    return replace(plan, launch=launch,
                   args=launch.conv.gemm_args(launch.schedule.problem, plan.beta))


class _ImplicitView(NamedTuple):
    """The convolution an im2col launch runs (``run``) over the channels-last view of
    ``strides`` (image, row, column) at element ``x_off`` and filter rows ``ldb`` apart at
    ``w_off``, and the (input, filter) copies made for it (None: read in place)."""

    run: Any
    strides: tuple
    ldb: int
    copies: tuple
    x_off: int = 0
    w_off: int = 0


def _implicit_view(plan: ConvPlan, cp: int | None, fold, merged: int | None) -> _ImplicitView:
    """What :func:`_implicit`'s launch reads: folded taps (``fold``), channels padded to
    ``cp``, groups merged ``merged`` to one, or the caller's arrays (an NCHW input copied to
    NHWC, filters to (K, R, S, C / groups) rows where theirs are not)."""
    g, ops = plan.geometry, plan.operands
    if fold is not None:  # few channels, each filter row's taps folded into channels
        run = fold.geometry
        return _ImplicitView(run, fold.input_strides, run.r * run.c, ("folded", "folded"))
    if cp is not None:  # few channels: zero-padded copies that fill 16-byte vectors
        return _ImplicitView(g._replace(c=cp), (g.h * g.w * cp, g.w * cp, cp),
                             g.r * g.s * cp, ("padded", "padded"))
    shape, xs = (g.n, g.c, g.h, g.w), tuple(ops.input_strides)
    if g.c <= 1 or xs[1] == 1:  # channels contiguous: read in place
        strides = tuple(_stride(shape, xs, axis) for axis in (0, 2, 3))
        x_copy, x_off = None, ops.input_offset
    else:  # NCHW: one NHWC copy
        strides, x_copy, x_off = (g.h * g.w * g.c, g.w * g.c, g.c), "nhwc", 0
    if merged is not None:  # groups of few channels merged: their filters copied merged
        run = g._replace(groups=g.groups // merged)
        return _ImplicitView(run, strides, (run.c // run.groups) * g.r * g.s,
                             (x_copy, "merged"), x_off)
    ldb = _filter_rows((g.k, g.c // g.groups, g.r, g.s), ops.weight_strides)
    if ldb is None:
        return _ImplicitView(g, strides, (g.c // g.groups) * g.r * g.s, (x_copy, "krsc"), x_off)
    return _ImplicitView(g, strides, ldb, (x_copy, None), x_off, ops.weight_offset)
