"""Plans: the Kind of representative steps, label groups, copies, reductions, the table."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from skcontract.contract import contract_path, einsum
from skcontract.parse import parse_equation
from skcontract.kernels.resolve import schedule_plan
from skcontract.dtypes import accumulator_dtype
from skcontract.plan import GEMM_KINDS, build_plan, Kind, Plan, Step
from skcontract.plan.plan import UNPRICED_HINT
from skcontract.plan.classify import classify_groups, view_ok
from skcontract.schedule.device import DeviceInfo

# (subscripts, shapes, kind of the last step, (batch, m, n, k) label groups)
KINDS = [
    ("ij,jk->ik", [(8, 4), (4, 16)], Kind.GEMM, ("", "i", "k", "j")),
    ("ij,j->i", [(8, 4), (4,)], Kind.GEMV, ("", "i", "", "j")),
    ("j,jk->k", [(4,), (4, 8)], Kind.GEMV, ("", "", "k", "j")),
    ("bij,bjk->bik", [(2, 8, 4), (2, 4, 16)], Kind.BATCHED_GEMM, ("b", "i", "k", "j")),
    ("bij,bj->bi", [(2, 8, 4), (2, 4)], Kind.GEMV, ("b", "i", "", "j")),
    ("i,i->", [(7,), (7,)], Kind.DOT, ("", "", "", "i")),
    ("bi,bi->b", [(3, 7), (3, 7)], Kind.DOT, ("b", "", "", "i")),
    ("i,j->ij", [(3,), (4,)], Kind.OUTER, ("", "i", "j", "")),
    ("bi,bj->bij", [(2, 3), (2, 4)], Kind.OUTER, ("b", "i", "j", "")),
    ("ij,ij->ij", [(3, 4), (3, 4)], Kind.ELEMENTWISE, ("ij", "", "", "")),
    ("ij,j->ij", [(3, 4), (4,)], Kind.ELEMENTWISE, ("j", "i", "", "")),
    ("ii->i", [(4, 4)], Kind.UNARY, ("", "i", "", "")),
    ("ij->", [(4, 5)], Kind.UNARY, ("", "", "", "ij")),
    ("abcd,cdef->abef", [(2, 3, 4, 5), (4, 5, 6, 7)], Kind.GEMM, ("", "ab", "ef", "cd")),
    ("ij,jk->ik", [(1, 4), (4, 16)], Kind.GEMV, ("", "i", "k", "j")),  # M == 1
]


@pytest.mark.parametrize("subscripts,shapes,kind,groups", KINDS,
                         ids=[k[0] + "/" + k[2].name for k in KINDS])
def test_kind_table(subscripts, shapes, kind, groups):
    path, plan = contract_path(subscripts, *shapes, shapes=True)
    step = plan.steps[-1]
    assert step.kind is kind
    got = tuple("".join(g) for g in (step.batch_labels, step.m_labels, step.n_labels,
                                     step.k_labels))
    assert got == groups
    assert kind.value in str(plan)


def test_classify_groups_by_size():
    assert classify_groups(1, 5, 6, 7) is Kind.GEMM
    assert classify_groups(2, 5, 6, 7) is Kind.BATCHED_GEMM
    assert classify_groups(1, 5, 1, 7) is Kind.GEMV
    assert classify_groups(3, 1, 1, 7) is Kind.DOT
    assert classify_groups(1, 5, 6, 1) is Kind.OUTER
    assert classify_groups(9, 1, 6, 1) is Kind.ELEMENTWISE
    assert Kind.GEMM in GEMM_KINDS and Kind.OUTER not in GEMM_KINDS


def test_step_sizes_and_problem():
    _, plan = contract_path("bij,bjk->bik", (4, 8, 16), (4, 16, 32), shapes=True,
                            dtype=np.float32)
    (s,) = plan.steps
    assert (s.batch, s.m, s.n, s.k) == (4, 8, 32, 16)
    assert s.problem == (8, 32, 16, 4)
    assert s.dtype == np.float32 and s.accumulator_dtype == np.float32
    assert s.flops == 2 * 4 * 8 * 32 * 16
    assert s.is_gemm_class
    assert s.output == ("b", "i", "k") and s.output_shape == (4, 8, 32)
    assert s.needs_copy == (False, False) and s.layouts == ("row", "row")


def test_plan_and_step_are_frozen():
    _, plan = contract_path("ij,jk->ik", (2, 3), (3, 4), shapes=True)
    assert isinstance(plan, Plan) and isinstance(plan.steps[0], Step)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.steps[0].kind = Kind.DOT
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.dtype = np.float32


def test_steps_are_those_the_step_init_makes():
    """A plan's steps are sized without Step's own __init__ (plan._new_step): each is, field
    for field, the Step that __init__ makes of its values, and frozen as that one is."""
    assert not hasattr(Step, "__post_init__")
    for subscripts, shapes in [("iij,jk,k->i", [(3, 3, 4), (4, 5), (5,)]),
                               ("bij,bjk->bik", [(1, 3, 4), (6, 4, 5)]),
                               ("ab,bc,cd->", [(2, 3), (3, 4), (4, 5)])]:
        for s in contract_path(subscripts, *shapes, shapes=True)[1].steps:
            made = Step(**{f.name: getattr(s, f.name) for f in dataclasses.fields(Step)})
            assert vars(s) == vars(made) and s == made and hash(s) == hash(made)
            with pytest.raises(dataclasses.FrozenInstanceError):
                s.flops = 0


@pytest.mark.parametrize("subscripts,shapes,copies,layouts", [
    ("ij,jk->ik", [(8, 4), (4, 16)], (False, False), ("row", "row")),
    ("ji,jk->ik", [(4, 8), (4, 16)], (False, False), ("col", "row")),   # A^T: a view
    ("ij,kj->ik", [(8, 4), (16, 4)], (False, False), ("row", "col")),   # B^T: a view
    ("bij,jbk->bik", [(2, 8, 4), (4, 2, 16)], (False, False), ("row", "row")),  # batch stride
    ("abc,ca->b", [(2, 3, 4), (4, 2)], (True, False), ("row", "row")),  # k=(c,a) not mergeable
    ("ijk,ikj->i", [(2, 3, 4), (2, 4, 3)], (False, True), ("col", "row")),
])
def test_needs_copy(subscripts, shapes, copies, layouts):
    _, plan = contract_path(subscripts, *shapes, shapes=True)
    step = plan.steps[-1]
    assert step.needs_copy == copies
    assert step.layouts[0] in ("row", "col")
    if not any(copies):
        assert step.layouts == layouts
    rng = np.random.default_rng(0)
    ops = [rng.standard_normal(s) for s in shapes]
    np.testing.assert_allclose(einsum(subscripts, *ops), np.einsum(subscripts, *ops),
                               rtol=1e-12)


@pytest.mark.parametrize("subscripts,shapes,batch,holds", [
    # A's leading M label i is the batch; B (jm) is read with batch stride 0
    ("ijkl,jm->iklm", [(3, 5, 8, 8), (5, 6)], ("i",), (True, False)),
    # B's leading N label i is the batch; A (jk) broadcast
    ("jk,ijl->ikl", [(5, 9), (3, 5, 70)], ("i",), (False, True)),
])
def test_leading_labels_become_a_broadcast_batch(subscripts, shapes, batch, holds):
    _, plan = contract_path(subscripts, *shapes, shapes=True)
    (step,) = plan.steps
    assert step.batch_labels == batch and step.holds_batch == holds
    assert step.needs_copy == (False, False)
    lacking = "AB"[holds.index(False)]
    assert f"({lacking} broadcast)" in plan.table()
    rng = np.random.default_rng(3)
    ops = [rng.standard_normal(s) for s in shapes]
    np.testing.assert_allclose(einsum(subscripts, *ops), np.einsum(subscripts, *ops),
                               rtol=1e-12)


def test_broadcast_batch_only_where_it_saves_a_copy():
    # views as they are: no batch taken from M
    _, plan = contract_path("ikj,jl->ikl", (4, 96, 5), (5, 7), shapes=True)
    assert plan.steps[0].batch_labels == () and plan.steps[0].needs_copy == (False, False)
    # a batch leaving fewer than BROADCAST_BATCH_MIN_ROWS rows keeps the copy
    _, plan = contract_path("ijk,jl->ikl", (40, 5, 6), (5, 7), shapes=True)
    assert plan.steps[0].batch_labels == () and plan.steps[0].needs_copy == (True, False)
    # ... as does a step that sums nothing
    _, plan = contract_path("ij,k->ikj", (4, 70), (90,), shapes=True)
    assert all(st.holds_batch == (True,) * len(st.inputs) for st in plan.steps)


@pytest.mark.parametrize("subscripts,shapes", [
    ("aijk,ajl->aikl", [(1, 3, 5, 70), (1, 5, 6)]),   # a shared batch of size 1 stays
    ("afb,da,edab,cbe->ec", [(1, 1, 64), (96, 1), (8, 96, 1, 64), (3, 64, 8)]),
])
def test_a_size_one_batch_is_kept(subscripts, shapes):
    rng = np.random.default_rng(5)
    ops = [rng.standard_normal(s) for s in shapes]
    np.testing.assert_allclose(einsum(subscripts, *ops), np.einsum(subscripts, *ops),
                               rtol=1e-12)


def test_view_ok_rule():
    sizes = dict(b=2, m=3, k=4)
    c = dict(b=12, m=4, k=1)      # C-contiguous (b, m, k)
    assert view_ok((("b",), ("m",), ("k",)), c, sizes) == (True, True)
    f = dict(b=12, m=1, k=3)      # column-major matrices
    assert view_ok((("b",), ("m",), ("k",)), f, sizes) == (True, False)
    bad = dict(b=1, m=8, k=2)     # no unit stride in the matrix
    assert view_ok((("b",), ("m",), ("k",)), bad, sizes)[0] is False


@pytest.mark.parametrize("dtype,acc", [
    ("float16", "float32"), ("float32", "float32"), ("float64", "float64"),
    ("complex64", "complex64"), ("complex128", "complex128"), ("int8", "int32"),
    ("uint16", "uint32"), ("int32", "int32"), ("int64", "int64"), ("uint64", "uint64"),
    ("bool", "int32"),
])
def test_steps_accumulate_in_accumulator_dtype(dtype, acc):
    _, plan = contract_path("ij,jk->ik", (8, 4), (4, 8), shapes=True, dtype=dtype)
    s = plan.steps[0]
    assert s.accumulator_dtype == np.dtype(acc) == accumulator_dtype(dtype)
    assert s.reduces and s.associative
    assert f"sum assoc {acc}" in str(plan)


def test_no_reduction_steps():
    _, plan = contract_path("i,j->ij", (3,), (4,), shapes=True)
    assert not plan.steps[0].reduces
    assert plan.steps[0].row()[9] == "-"


def test_plan_keeps_its_device():
    dev = dataclasses.replace(DeviceInfo.h200(), atomic_accumulators=frozenset())
    _, plan = contract_path("ij,jk->ik", (8, 4), (4, 8), shapes=True, device=dev)
    assert plan.device is dev


def test_unary_steps_first():
    _, plan = contract_path("iij,jk,kl->il", (3, 3, 4), (4, 5), (5, 6), shapes=True)
    assert plan.steps[0].kind is Kind.UNARY
    assert plan.steps[0].subscripts == "iij->ij"
    assert [s.kind for s in plan.steps[1:]] == [Kind.GEMM, Kind.GEMM]


def test_broadcast_size1_label_is_squeezed():
    _, plan = contract_path("ij,jk->ik", (3, 1), (4, 5), shapes=True)
    assert plan.steps[0].kind is Kind.UNARY and plan.steps[0].squeeze == (1,)
    assert plan.steps[-1].kind is Kind.OUTER


def test_table_has_one_row_per_step():
    path, plan = contract_path("abc,cd,de,ea->b", (2, 3, 4), (4, 5), (5, 6), (6, 2),
                               shapes=True)
    text = str(plan)
    assert repr(plan) == text
    lines = text.splitlines()
    header = lines[1].split()
    assert header == ["#", "step", "kind", "batch", "M", "N", "K", "FLOPs", "copy",
                      "reduction", "schedule"]
    assert len(lines) == 2 + len(plan.steps) + 2  # the path, and that nothing was priced
    assert lines[-1] == UNPRICED_HINT
    for s, line in zip(plan.steps, lines[2:]):
        assert line.split()[1] == s.subscripts
    assert plan.flops == sum(s.flops for s in plan.steps)
    assert list(plan.path) == path


def test_a_plan_shows_the_operands_it_reads_conjugated():
    """conj= marks each step input read conjugated with *, a unary step passing the mark to
    its result (a trace commutes with conjugation); the tail names the operands. A real
    plan drops conj (its operands are their own conjugates); the flags are the steps'."""
    shapes = [(40, 40), (40, 50), (50, 36)]
    _, plan = contract_path("ii,ij,jk->k", *shapes, shapes=True, dtype="complex64",
                            conj=(0, 2), device="h100")
    text = str(plan)
    assert "conj: operand(s) 0, 2 read conjugated" in text
    flagged = [s for s in plan.steps if any(s.conj)]
    assert flagged and all("*" in s.subscripts for s in flagged)
    assert sum(s.subscripts.count("*") for s in plan.steps) == 2 and not plan.conj_result
    assert all(s.kind is not Kind.UNARY for s in flagged)
    # matrix-vector products on the Dot kernel read them as they load them (the row names
    # the kernel build that does), and the H100's complex matrix products fold them into
    # their embeddings: no copy; NumPy's steps copy them
    assert not any(any(s.conj_copies) for s in flagged)
    assert "_conjA_" in text and "_conjB_" in text
    chain = [(300, 400), (400, 500), (500, 60)]
    _, gpu = contract_path("ij,jk,kl->il", *chain, shapes=True, dtype="complex64",
                           conj=(0, 2), device="h100")
    assert sum(any(s.conj) for s in gpu.steps) == 2
    assert not any(any(s.conj_copies) for s in gpu.steps)
    _, host = contract_path("ij,jk,kl->il", *chain, shapes=True, dtype="complex64",
                            conj=(0, 2))
    assert [s.conj_copies for s in host.steps] == [s.conj for s in host.steps]
    _, real = contract_path("ii,ij,jk->k", *shapes, shapes=True, conj=(0, 2))
    assert real.conj == () and "*" not in str(real)
    _, view = contract_path("ij->ji", (3, 4), shapes=True, dtype="complex128", conj=(0,))
    assert view.conj_result and "the result conjugated last" in str(view)


def test_small_complex_products_copy_their_conjugated_operands(monkeypatch):
    """Products of sides up to 32 on the small-batched kernel (small_batched.SINGLE_COMPLEX)
    read their operands as they lie: they copy the conjugated ones."""
    from skcontract import contract
    from skcontract.kernels import small_batched
    from skcontract.plan import peak
    monkeypatch.setattr(small_batched, "SINGLE_COMPLEX", True)
    monkeypatch.setattr(peak, "SMALL_COMPLEX_DTYPES", frozenset(small_batched.COMPLEX_TYPES))
    contract._PATHS.clear()
    _, small = contract_path("ij,jk->ik", (4, 5), (5, 3), shapes=True, dtype="complex64",
                             conj=(0,), device="h100")
    contract._PATHS.clear()
    assert small.steps[0].conj_copies == (True, False)


def test_contract_path_from_arrays_and_dtype():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float16)
    path, plan = contract_path("ij,jk->ik", a, b)
    assert path == [(0, 1)] and plan.dtype == np.float32
    path, plan = contract_path(a, [0, 1], b, [1, 2], [0, 2])
    assert plan.subscripts == "AB,BC->AC"  # numpy's mapping: 0 -> 'A', 26 -> 'a'


@pytest.mark.parametrize("optimize", [False, True, "auto", "greedy", "optimal", "dp",
                                      "branch-2", "random-greedy"])
def test_path_round_trips(optimize):
    shapes = [(2, 30), (30, 40), (40, 3), (3, 5)]
    path, plan = contract_path("ab,bc,cd,de->ae", *shapes, shapes=True, optimize=optimize)
    again, plan2 = contract_path("ab,bc,cd,de->ae", *shapes, shapes=True, optimize=path)
    assert again == path and plan2.flops == plan.flops
    _, plan3 = contract_path("ab,bc,cd,de->ae", *shapes, shapes=True,
                             optimize=["einsum_path", *path])
    assert plan3.flops == plan.flops


def test_optimal_beats_left_to_right():
    shapes = [(2, 30), (30, 40), (40, 3)]
    _, naive = contract_path("ab,bc,cd->ad", *shapes, shapes=True, optimize=False)
    _, best = contract_path("ab,bc,cd->ad", *shapes, shapes=True, optimize="optimal")
    assert best.flops <= naive.flops


def test_memory_limit_is_kept_by_slicing_not_by_an_nary_chain():
    """opt_einsum's limited paths hold n-ary steps whose chains exceed the limit; the plan
    takes the unlimited path's pairwise steps and slices them under the limit."""
    shapes = [(4, 5), (5, 6), (6, 7), (7, 8)]
    path, plan = contract_path("ab,bc,cd,de->ae", *shapes, shapes=True, optimize="greedy",
                               memory_limit=1)
    assert all(len(ids) == 2 for ids in path) and len(plan.steps) == 3
    assert plan.slicing is not None and plan.largest_intermediate == 1
    rng = np.random.default_rng(1)
    ops = [rng.standard_normal(s) for s in shapes]
    np.testing.assert_allclose(einsum("ab,bc,cd,de->ae", *ops, memory_limit=1),
                               np.einsum("ab,bc,cd,de->ae", *ops), rtol=1e-12)


def test_ellipsis_labels_print_as_greek():
    _, plan = contract_path("...ij,...jk->...ik", (5, 2, 3), (3, 4), shapes=True)
    assert "α" in plan.steps[0].subscripts


def test_schedule_plan_resolves_gemm_steps_on_the_kernels():
    """Every GEMM-class step gets the schedule of the kernel that runs it (a catalogue tile);
    plans are values, so the original keeps None."""
    from skcontract.kernels.catalogue import entries_for

    plan = build_plan(parse_equation("ij,jk->ik", [(256, 512), (512, 128)]), np.float32,
                      device=DeviceInfo.h200())
    scheduled = schedule_plan(plan, DeviceInfo.h200())
    s = scheduled.steps[0].schedule
    assert plan.steps[0].schedule is None
    assert s is not None and s.tile in [b.tile for b in entries_for("float32", "3xtf32", 90)]
    assert s.summary() in scheduled.table()


def test_an_einsum_step_shares_b_rows_that_start_off_lines():
    """A float16 step whose contiguous B has rows of 2000 bytes (off the L2's lines) runs
    on a narrow cluster pair; one of 2048 bytes on the single CTA's tile."""
    from skcontract.kernels.resolve import resolve_step

    h200 = DeviceInfo.h200()
    for n, shared in ((1000, True), (1024, False)):
        plan = build_plan(parse_equation("ij,jk->ik", [(1000, 1000), (1000, n)]),
                          np.float16, device=h200)
        r = resolve_step(plan.steps[0], h200)
        assert r.entry.b_off_lines_only is shared and (r.entry.CLUSTER == 2) is shared


def test_schedule_plan_leaves_dtypes_without_kernels_to_the_fallback():
    plan = build_plan(parse_equation("ij,jk->ik", [(8, 4), (4, 8)]), np.bool_,
                      device=DeviceInfo.h200())
    assert schedule_plan(plan, DeviceInfo.h200()).steps[0].schedule is None


@pytest.mark.parametrize("shapes,dtype,why", [
    (((8, 4), (4, 8)), "int16", "no kernel for int16"),
    # the real form of a complex product is 2n x 2k
    (((4, 1_200_000_000), (1_200_000_000, 4)), "complex64", "a dimension beyond the kernels'"),
    (((8, 0), (0, 8)), "float32", "empty"),
    (((4, 3_000_000_000), (3_000_000_000, 4)), "float16", "a dimension beyond the kernels'"),
    # within a kernel tile of 2^31: M + BM - 1 would wrap
    (((2**31 - 1, 8), (8, 8)), "float16", "a dimension beyond the kernels'"),
])
def test_a_gemm_step_without_a_schedule_says_why(shapes, dtype, why):
    """A GEMM-class step the GPU runs on CuPy's fallback shows the reason in the plan's
    schedule column, not a bare '-'."""
    subscripts = "ij,jk->ik" if len(shapes[1]) == 2 else "ij,j->i"
    _, plan = contract_path(subscripts, *shapes, shapes=True, dtype=dtype, device="h200")
    (step,) = plan.steps
    assert step.schedule is None and why in step.unscheduled
    assert f"- ({step.unscheduled})" in str(plan)


def test_a_dot_whose_tile_walk_passes_32_bits_has_no_schedule():
    """Every dimension fits the kernels' index, but 270000 x 65536 rows of one-to-eight-row
    Dot tiles walk past 2^31 tile positions: no schedule, and the reason says so (the
    range rows used to be accepted and the kernel's tile index wrapped)."""
    _, plan = contract_path("bij,bj->bi", (270000, 65536, 2), (270000, 2), shapes=True,
                            dtype="float16", device="h200")
    (step,) = plan.steps
    assert step.schedule is None and "its tiles beyond" in step.unscheduled


def test_a_fallback_step_runs_float32_exactly_whatever_the_precision():
    """CuPy runs an unscheduled float32 step exactly: the plan does not name tf32 for it."""
    _, plan = contract_path("ij,jk->ik", (4, 0), (0, 4), shapes=True, dtype="float32",
                            device="h200", precision="tf32")
    (step,) = plan.steps
    assert step.precision is None and "tf32" not in str(plan).splitlines()[2]


def test_a_plan_says_which_device_its_schedules_are_for():
    from skcontract.contract import contract_expression

    _, plan = contract_path("ij,jk->ik", (256, 512), (512, 128), shapes=True, device="h100")
    head = str(plan).splitlines()[0]
    assert "GPU backend launches on NVIDIA H100 (preset)" in head and "NumPy backend" in head
    cpu_only = contract_expression("ij,jk->ik", (256, 512), (512, 128)).plan
    assert "schedules" not in str(cpu_only).splitlines()[0]


def test_drawing_a_plan_without_schedules_says_why(tmp_path):
    """explain(draw=...) on a plan whose GEMM-class steps all fall back names the reason."""
    from skcontract import explain
    with pytest.raises(ValueError, match="no kernel for int16"):
        explain("ij,jk->ik", (4, 3), (3, 4), shapes=True, dtype="int16", device="h200",
                draw=str(tmp_path / "x.png"))


def test_a_plan_for_no_device_prices_no_gpu_schedule(monkeypatch):
    """contract_path without device= on NumPy operands or shapes plans the steps and their
    classes only: the resolver is not entered, the plan has no device, and its table says
    how to ask for GPU schedules; with device= it shows them."""
    import skcontract.planning as P

    def entered(*args, **kwargs):
        raise AssertionError("a plan for no device priced GPU schedules")
    monkeypatch.setattr(P, "schedule_plan", entered)
    _, plan = contract_path("bij,bjk->bik", (8, 4096, 4096), (8, 4096, 4096), shapes=True)
    assert plan.device is None and plan.steps[0].launch is None
    assert str(plan).splitlines()[-1] == UNPRICED_HINT
    _, plan = contract_path("ij,jk->ik", np.ones((4, 5)), np.ones((5, 6)))
    assert plan.device is None
    monkeypatch.undo()
    _, plan = contract_path("ij,jk->ik", (64, 32), (32, 48), shapes=True, device="h200")
    assert plan.steps[0].launch is not None and UNPRICED_HINT not in str(plan)
