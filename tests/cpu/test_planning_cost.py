"""What planning costs may not change: the schedules chosen (searches that skip candidates
pick what the full search picks), and the schedules and plans kept for reuse are the ones
that would be made again."""
import numpy as np
import pytest

from skcontract.kernels.resolve import resolve_gemm
from skcontract.schedule import DeviceInfo, GemmProblem, schedule_problem
from skcontract.schedule import decompose as D
from skcontract.schedule import scheduler as S
from skcontract.schedule import table as T
from skcontract.schedule.types import TileOption

H200 = DeviceInfo.h200()


def _exhaustive(items, bound, build, closer=None):
    """The search without bounds: every item built, the first of the cheapest kept."""
    return S._cheapest([build(x) for x in items])


def _record(r):
    s = r.schedule
    return (s.summary(), s.digest(), s.grid, repr(s.predicted_time_us), repr(s.candidates),
            r.entry.name)


PROBLEMS = [(1, 1, 8192, 1, "float64"), (1, 128, 8192, 3, "float32"),
            (7, 2, 384, 1, "float64"), (24, 32, 420, 1, "float64"),
            (300, 128, 8192, 1, "float16"), (100, 1000, 8192, 1, "bfloat16"),
            (64, 33, 1000, 3, "float16"), (1000, 1000, 420, 1, "float32"),
            (4096, 128, 16, 3, "float64"), (300, 300, 8192, 1, "int8")]


@pytest.mark.parametrize("m,n,k,batch,dtype", PROBLEMS)
@pytest.mark.parametrize("options", [{}, {"mode": "split_k"}, {"mode": "aligned"},
                                     {"reduction": "atomic"}, {"reduction": "arrival"}])
def test_bounded_searches_pick_what_the_full_search_picks(m, n, k, batch, dtype, options,
                                                          monkeypatch):
    """Stream-K's grids, split_k's and aligned's split counts are searched without building
    the candidates whose bound exceeds the best time found: the schedule chosen, its
    candidates and their predicted times are those of the search that builds them all."""
    problem = GemmProblem(m, n, k, batch=batch, dtype=dtype)
    S.clear_schedule_cache()
    try:
        bounded = _record(resolve_gemm(problem, H200, **options))
    except ValueError as e:
        bounded = str(e)
    S.clear_schedule_cache()
    monkeypatch.setattr(S, "_cheapest_bounded", _exhaustive)
    try:
        full = _record(resolve_gemm(problem, H200, **options))
    except ValueError as e:
        full = str(e)
    S.clear_schedule_cache()
    assert bounded == full


def test_the_bounded_search_keeps_the_first_of_equals():
    """Of equal predicted times the search keeps the item listed first, whatever order it
    builds them in."""
    class Fake:
        def __init__(self, t, name):
            self.predicted_time_us, self.name = t, name
    times = {"a": 5.0, "b": 3.0, "c": 3.0, "d": 4.0}
    best = S._cheapest_bounded(list(times), lambda x: {"a": 0.0, "b": 2.0, "c": 1.0,
                                                       "d": 0.5}[x],
                               lambda x: Fake(times[x], x))
    assert best.name == "b"


@pytest.mark.parametrize("n_tiles,per_tile,resident", [(1, 4, 132), (1, 1024, 132),
                                                      (3, 27, 132), (24, 53, 264),
                                                      (7, 48, 132), (131, 200, 132),
                                                      (1, 8, 264), (2, 9, 2)])
def test_distinct_units_match_the_full_walk(n_tiles, per_tile, resident):
    """The Stream-K grids tried stop where a grid runs as fewer units than its CTAs (every
    larger grid runs as those units too): the same grids as the walk over all of them."""
    ts = D.TileSpace(n_tiles, shape=(1, n_tiles * 64, 64, per_tile * 16, 64, 64))
    grids = S._sk_grid_options(n_tiles, per_tile, resident)
    used, full = set(), []
    for g in grids:
        u = D.stream_k_units(n_tiles * per_tile, per_tile, g)
        if u not in used:
            used.add(u)
            full.append(g)
    assert S._distinct_units(grids, ts, 16) == full


def test_equal_arguments_give_the_schedule_made_for_them():
    problem = GemmProblem(1000, 1000, 4096, dtype="float16")
    tiles = [TileOption((128, 128, 64)), TileOption((64, 64, 64), 2)]
    first = schedule_problem(problem, H200, tiles=tiles, reduction="deterministic")
    again = schedule_problem(GemmProblem(1000, 1000, 4096, dtype="float16"), DeviceInfo.h200(),
                             tiles=tuple(tiles), reduction="deterministic")
    assert again is first
    # another argument, another schedule (a grid of numpy's int is not one of Python's)
    other = schedule_problem(problem, H200, tiles=tiles, reduction="atomic")
    assert other is not first and other.reduction == "atomic"
    a = schedule_problem(problem, H200, tile=(128, 128, 64), mode="stream_k", grid=2)
    b = schedule_problem(problem, H200, tile=(128, 128, 64), mode="stream_k",
                         grid=np.int64(2))
    assert a is not b and a.digest() == b.digest()
    # tiles given as an iterator are planned (and not kept)
    s = schedule_problem(problem, H200, tiles=iter(tiles), reduction="deterministic")
    assert s.digest() == first.digest() and s is not first


def test_a_table_of_range_rows_still_refuses_an_unknown_reduction():
    ts = D.tile_space(GemmProblem(256, 256, 64), 128, 128)
    raw = D.data_parallel(ts, 64, 4)
    assert not len(raw.tile)  # range rows only
    with pytest.raises(ValueError, match="unknown reduction"):
        D.build_table(raw, 64, "sideways")
    table, offsets = D.build_table(raw, 64, "atomic")
    assert len(table) == 4 and np.array_equal(offsets, [0, 1, 2, 3, 4])


def _raws():
    """(raw, bk, reduction, shared_sum) of every mode's decompositions on uniform, grouped
    and HyTiS-re-tiled spaces."""
    from skcontract.schedule.types import grouped_problem
    for m, n, k, batch in [(256, 256, 4096, 1), (100, 1000, 8192, 3), (24, 32, 420, 1),
                           (2176, 1024, 4096, 1), (7, 2, 384, 2)]:
        ts = D.tile_space(GemmProblem(m, n, k, batch=batch), 64, 64)
        bk = 16
        p = ts.iters(bk)
        raws = [D.data_parallel(ts, bk, min(ts.n, 132)), D.data_parallel(ts, bk, 300),
                D.stream_k(ts, bk, 132), D.stream_k(ts, bk, 17, groups=2),
                D.split_k(ts, bk, 4, 132), D.aligned(ts, bk, 4)]
        for raw in (D.hybrid(ts, bk, 132), D.hytis(ts, bk, 132, (32, 32))):
            if not isinstance(raw, str):
                raws.append(raw)
        assert p > 0
        for raw in raws:
            for reduction in ("atomic", "deterministic", "arrival", "cluster"):
                yield raw, bk, reduction, reduction == "arrival"
    grouped = grouped_problem([(300, 200, 640), (64, 1000, 640), (5, 7, 640)])
    ts = D.tile_space(grouped, 64, 64)
    for raw in (D.data_parallel(ts, 32, 20), D.stream_k(ts, 32, 50)):
        yield raw, 32, "arrival", True


def test_the_priced_rows_are_the_tables_priced_columns():
    """A candidate is priced on cost_rows' rows before its table is built: they hold the
    table's values in the columns the cost model reads, in its order, and price it alike."""
    from skcontract.schedule.heuristics import predict
    for raw, bk, reduction, shared in _raws():
        table, offsets = D.build_table(raw, bk, reduction, shared_sum=shared)
        rows, row_offsets = D.cost_rows(raw, bk, reduction, shared_sum=shared)
        cols = [c for c in D.PRICED_COLUMNS if c != T.RANGE_COUNT]
        ranges = (table[:, T.FLAGS] & T.FLAG_RANGE) != 0
        assert np.array_equal(rows[:, cols], table[:, cols]) and \
            np.array_equal(rows[ranges, T.RANGE_COUNT], table[ranges, T.RANGE_COUNT]) and \
            np.array_equal(row_offsets, offsets)
        assert D.within_index(raw)
        for solo in (1.0, 0.7):
            args = (raw.grid, (64, 64, bk), None, "float16", "float32", H200, 1.2, 1.5,
                    reduction == "cluster", None, solo)
            assert repr(predict(rows, row_offsets, *args)) == \
                repr(predict(table, offsets, *args))
    with pytest.raises(ValueError, match="unknown reduction"):
        D.cost_rows(raw, bk, "sideways")


@pytest.mark.parametrize("dtype,tile,eff,solo", [("float16", (128, 128, 64), None, 1.0),
                                                 ("float16", (128, 128, 64), 1.1, 0.62),
                                                 ("float64", (64, 64, 16), 2.5, 0.8),
                                                 ("int8", (128, 256, 128), 0.9, 1.0)])
def test_a_data_parallel_table_is_priced_from_its_tile_counts(dtype, tile, eff, solo):
    """predict_data_parallel is predict on the data-parallel table, to the last bit, for
    any count of tiles, grid (above the tiles too) and occupancy; None beyond the resident
    CTAs (the table's waves price it)."""
    from skcontract.schedule.heuristics import predict, predict_data_parallel
    rng = np.random.default_rng(5)
    for ctas in (1, 2):
        device = H200.with_occupancy(ctas)
        resident = device.resident_ctas
        cases = [(1, 1), (131, 131), (132, 132), (500, resident), (3, 9), (90, 85)]
        cases += [(int(n), int(min(g, resident))) for n, g in rng.integers(1, 3000, (40, 2))]
        for n_tiles, grid in cases:
            k = int(rng.integers(1, 20000))
            ts = D.TileSpace(n_tiles, shape=(1, n_tiles * tile[0], tile[1], k, *tile[:2]))
            table, offsets = D.build_table(D.data_parallel(ts, tile[2], grid), tile[2],
                                           "atomic")
            args = (tile, dtype, "float32", device, eff, 1.3)
            want = predict(table, offsets, grid, tile, None, *args[1:], solo_fraction=solo)
            got = predict_data_parallel(n_tiles, grid, k, *args, solo_fraction=solo)
            assert repr(got) == repr(want), (n_tiles, grid, k)
    assert predict_data_parallel(10, 300, 64, tile, dtype, "float32", H200) is None


def test_a_data_parallel_table_written_directly_is_the_one_built():
    """The table of a data-parallel schedule chosen is written directly
    (data_parallel_table): the table and offsets build_table makes of its splits."""
    for n_tiles in (1, 2, 7, 131, 132, 133, 500, 4097):
        for grid in (1, 3, 131, 132, 264, 300):
            ts = D.tile_space(GemmProblem(n_tiles * 64, 64, 1000, dtype="float16"), 64, 64)
            table, offsets = D.data_parallel_table(ts, grid)
            want, want_offsets = D.build_table(D.data_parallel(ts, 64, grid), 64, "atomic")
            assert table.dtype == want.dtype and offsets.dtype == want_offsets.dtype
            assert np.array_equal(table, want) and np.array_equal(offsets, want_offsets)


@pytest.mark.parametrize("per_tile", [1, 8, 15, 16, 17, 27, 63, 64, 65, 200, 1024])
def test_a_stream_k_tile_has_no_more_splits_than_max_peers(per_tile):
    """auto weighs the arrival sum only where a tile can have SHARED_SUM_MIN_PEERS splits:
    Stream-K cuts no tile into more than max_peers splits, at any grid and groups."""
    for n_tiles in (1, 2, 3, 7, 40, 131):
        ts = D.TileSpace(n_tiles, shape=(1, n_tiles * 64, 64, per_tile * 16, 64, 64))
        for grid in sorted({1, 2, 3, 9, 33, 132, 264, n_tiles * per_tile}):
            for groups in (None, 1, 2, 4):
                raw = D.stream_k(ts, 16, grid, groups)
                peers = np.bincount(raw.tile).max() if len(raw.tile) else 1
                assert peers <= D.max_peers(per_tile), (n_tiles, grid, groups)


def test_a_candidate_beyond_32_bit_tables_is_refused_as_its_table_is():
    """A candidate whose table may hold values beyond the kernels' index is built to be
    priced, so that the overflow is raised where building it raises it."""
    from skcontract.schedule.table import INDEX_MAX, TableOverflow
    ts = D.tile_space(GemmProblem(65536, 1, 2, batch=270000), 1, 1)
    raw = D.data_parallel(ts, 2, 132)
    assert not D.within_index(raw) and ts.n > INDEX_MAX
    with pytest.raises(TableOverflow):
        D.build_table(raw, 2, "atomic")
    with pytest.raises(TableOverflow):
        schedule_problem(GemmProblem(65536, 1, 2, batch=270000, dtype="float16"), H200,
                         tiles=[(1, 1, 2), (2, 1, 2)])


def test_the_schedule_chosen_is_priced_as_its_table():
    """The schedule auto returns carries the prediction of its own table."""
    from skcontract.schedule.heuristics import predict
    for m, n, k, batch, dtype in PROBLEMS:
        for options in ({}, {"reduction": "arrival"}, {"mode": "hytis"}):
            S.clear_schedule_cache()
            try:
                s = resolve_gemm(GemmProblem(m, n, k, batch=batch, dtype=dtype), H200,
                                 **options).schedule
            except ValueError:
                continue
            got = predict(s.table, s.cta_offsets, s.grid, s.tile, s.small_tile, dtype,
                          s.accumulator_dtype, s.device, s.tile_efficiency, s.fixup_cost,
                          cluster=s.reduction == "cluster",
                          small_efficiency=s.small_efficiency, solo_fraction=s.solo_fraction)
            assert (got.time_us, got.efficiency, got.waves) == \
                (s.predicted_time_us, s.predicted_efficiency, s.waves)


# -- plans ------------------------------------------------------------------------------
def _networks():
    from opt_einsum.testing import rand_equation
    rng = np.random.default_rng(3)
    for seed in range(40):
        n = int(rng.integers(2, 30))
        yield rand_equation(n, 3, n_out=int(rng.integers(0, 3)), d_min=1, d_max=5, seed=seed)
    yield "iij,jk,kl,lm->im", [(3, 3, 4), (4, 5), (5, 6), (6, 2)]
    yield "abc,cd,bd,ae->e", [(2, 3, 4), (4, 5), (3, 5), (2, 6)]


@pytest.mark.parametrize("optimize", ["auto", False, [(0, 1, 2, 3)]])
def test_each_step_sums_the_labels_nothing_later_holds(optimize):
    """A step sums (K) the labels of its inputs that neither the output nor a term still
    alive holds, and keeps (batch, M, N) the others: the plan's terms as opt_einsum's path
    leaves them, checked step by step against the live terms."""
    from skcontract.parse import parse_equation
    from skcontract.plan import build_plan
    for eq, shapes in _networks():
        if isinstance(optimize, list) and len(shapes) != 4:
            continue
        plan = build_plan(parse_equation(eq, shapes), np.float64, optimize=optimize)
        out = set(plan.output)
        live = {}  # slot -> labels
        for i, (t, s) in enumerate(zip(plan.equation.inputs, plan.equation.shapes)):
            live[i] = [lab for lab, d in zip(t, s) if not (d == 1 and plan.equation.sizes[lab]
                                                           != 1)]
        for step in plan.steps:
            for a in step.args:
                live.pop(a)
            later = out.union(*live.values())
            held = [set(t) for t in step.inputs]
            if step.kind.name == "UNARY":
                assert set(step.k_labels) == held[0] - later, (eq, step)
                assert set(step.output) == held[0] & later, (eq, step)
            else:
                assert set(step.k_labels) == held[0] & held[1] - later, (eq, step)
                assert set(step.output) == (held[0] | held[1]) & later, (eq, step)
            live[step.result] = list(step.output)


def test_the_layout_search_stops_at_a_candidate_without_copies():
    """choose_layout keeps the first candidate of the fewest copied elements: it stops at
    one that copies nothing, as the full search would pick it."""
    from skcontract.plan import classify as K
    rng = np.random.default_rng(7)
    letters = "abcdefg"
    for _ in range(300):
        labels = list(rng.permutation(list(letters))[:int(rng.integers(2, 7))])
        sizes = {x: int(rng.choice([1, 2, 3, 70])) for x in labels}
        a = tuple(x for x in rng.permutation(labels) if rng.random() < 0.7) or (labels[0],)
        b = tuple(x for x in rng.permutation(labels) if rng.random() < 0.7) or (labels[-1],)
        keep = {x for x in labels if rng.random() < 0.5}
        batch, m, n, k, a_only, b_only = K.pair_groups(a, b, keep)
        if a_only or b_only:
            continue
        got = K.choose_layout(a, b, batch, m, n, k, sizes)
        sa, sb = K._contiguous_strides(a, sizes), K._contiguous_strides(b, sizes)
        size_a, size_b = (int(np.prod([sizes[x] for x in t])) for t in (a, b))
        best = None
        for bo, mo, no, ko in K._candidates(a, b, batch, K._in_term_order(m, a),
                                            K._in_term_order(n, b), k, sizes):
            ok_a, a_kc = K.view_ok((K._held(bo, a), mo, ko), sa, sizes)
            ok_b, b_nc = K.view_ok((K._held(bo, b), ko, no), sb, sizes)
            cost = (0 if ok_a else size_a) + (0 if ok_b else size_b)
            if best is None or cost < best[0]:
                best = (cost, (bo, mo, no, ko), (not ok_a, not ok_b),
                        ("row" if a_kc else "col", "row" if b_nc else "col"))
        assert got == best[1:], (a, b, sizes, keep)


def test_contract_path_returns_the_plan_it_made_for_equal_arguments():
    from skcontract import contract_path
    shapes = [(2, 3), (3, 4), (4, 5)]
    path, plan = contract_path("ij,jk,kl->il", *shapes, shapes=True, memory_limit=1000)
    path.append("mine")  # the caller's list
    again, same = contract_path("ij,jk,kl->il", *shapes, shapes=True, memory_limit=1000)
    assert same is plan and again == list(plan.path) and "mine" not in again
    # an equal argument of another type is checked, not taken for the one planned
    with pytest.raises(TypeError, match="memory_limit"):
        contract_path("ij,jk,kl->il", *shapes, shapes=True, memory_limit=True)
    assert contract_path("ij,jk,kl->il", *shapes, shapes=True, dtype="float32")[1] is not plan
    priced = contract_path("ij,jk,kl->il", *shapes, shapes=True, device="h200")[1]
    assert priced is not plan and plan.device is None and priced.steps[0].launch is not None


def test_the_planning_benchmark_runs(capsys, tmp_path):
    from skcontract.bench import planning
    out = tmp_path / "planning.md"
    assert planning.main(["--repeat", "1", "--shapes", "4", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "20-tensor network" in text and "First `einsum` calls" in text
    assert out.read_text().startswith("# Planning cost on the CPU")


def _clear_forms():
    """Empty every cache of size-free planning forms (subscripts, unary steps, skeletons,
    transposes) and the plans contract_path keeps."""
    from skcontract import contract as C
    from skcontract import parse
    from skcontract.backends import steps
    from skcontract.plan import plan
    C._PATHS.clear()
    parse._form.cache_clear()
    plan._unary_forms.cache_clear()
    plan._SKELETONS.clear()
    steps._perm.cache_clear()


def _structures():
    """(subscripts, [shapes of one structure]): broadcast, diagonal, ellipsis, batched and
    size-0/1 cases, and random networks, each at several sizes."""
    from opt_einsum.testing import rand_equation
    fixed = [("bij,bjk->bik", [[(2, 3, 4), (2, 4, 5)], [(5, 6, 7), (5, 7, 8)],
                               [(1, 3, 4), (6, 4, 5)], [(7, 1, 4), (7, 4, 1)],
                               [(8, 1, 9), (8, 9, 1)], [(2, 3, 0), (2, 0, 5)]]),
             ("ji,jk->ik", [[(3, 4), (3, 5)], [(1, 4), (1, 5)], [(3, 1), (3, 5)],
                            [(6, 7), (6, 8)]]),
             ("cba,cb->a", [[(2, 3, 4), (2, 3)], [(2, 3, 1), (2, 3)], [(1, 3, 4), (1, 3)]]),
             ("iij,jk,k->i", [[(3, 3, 4), (4, 5), (5,)], [(2, 2, 1), (1, 5), (1,)]]),
             ("...ij,...jk->...ik", [[(2, 3, 4), (4, 5)], [(6, 2, 3, 4), (1, 4, 5)]]),
             ("abcd,cdef->abef", [[(2, 3, 4, 5), (4, 5, 6, 7)], [(1, 70, 4, 5), (4, 5, 1, 1)],
                                  [(1, 90, 3, 2), (3, 2, 1, 1)], [(9, 9, 1, 2), (1, 2, 80, 2)]])]
    yield from fixed
    rng = np.random.default_rng(3)
    for seed in range(8):
        eq, shapes = rand_equation(int(rng.integers(3, 9)), 3, n_out=seed % 3, d_min=1,
                                   d_max=6, seed=seed)[:2]
        labels = {x: d for t, s in zip(eq.split("->")[0].split(","), shapes)
                  for x, d in zip(t, s)}
        again = {x: int(rng.integers(1, 7)) for x in labels}
        terms = eq.split("->")[0].split(",")
        yield eq, [list(shapes), [tuple(again[x] for x in t) for t in terms]]


def test_plans_made_from_kept_forms_are_those_made_afresh():
    """A structure planned at one size keeps its size-free forms (the parse, the unary
    steps, the steps' label groups and layouts where the size classes decide them, the
    transposes); a plan at new sizes made from them equals the plan made with none kept."""
    from skcontract import contract as C
    from skcontract import contract_path
    for optimize in ("adaptive", "auto", True, False):
        for subscripts, sizes in _structures():
            _clear_forms()
            fresh = [contract_path(subscripts, *s, shapes=True, optimize=optimize)
                     for s in sizes]
            for s, (path, plan) in zip(sizes, fresh):
                C._PATHS.clear()  # (the forms stay: only the plan is made again)
                again_path, again = contract_path(subscripts, *s, shapes=True,
                                                  optimize=optimize)
                _clear_forms()
                cold_path, cold = contract_path(subscripts, *s, shapes=True, optimize=optimize)
                assert (again_path, again, str(again)) == (cold_path, cold, str(cold)), \
                    (subscripts, s, optimize)
                assert again.steps == plan.steps and again_path == path


def test_a_layout_the_size_classes_decide_is_that_of_any_sizes_in_them():
    """search_layout says when its answer depends only on which labels have size 0, 1 or
    more (a copy-free candidate keeping a shared batch): any sizes of those classes then
    give the same answer; choose_layout gives its answer."""
    from skcontract.plan import classify as K
    rng = np.random.default_rng(11)
    letters = "abcdefg"
    decided = 0
    for _ in range(400):
        labels = list(rng.permutation(list(letters))[:int(rng.integers(2, 7))])
        sizes = {x: int(rng.choice([0, 1, 1, 2, 3, 70])) for x in labels}
        a = tuple(x for x in rng.permutation(labels) if rng.random() < 0.7) or (labels[0],)
        b = tuple(x for x in rng.permutation(labels) if rng.random() < 0.7) or (labels[-1],)
        keep = {x for x in labels if rng.random() < 0.5}
        batch, m, n, k, a_only, b_only = K.pair_groups(a, b, keep)
        if a_only or b_only:
            continue
        layout, by_class = K.search_layout(a, b, batch, m, n, k, sizes)
        assert K.choose_layout(a, b, batch, m, n, k, sizes) == layout
        if not by_class:
            continue
        decided += 1
        for _ in range(3):
            other = {x: d if d < 2 else int(rng.integers(2, 200)) for x, d in sizes.items()}
            assert K.search_layout(a, b, batch, m, n, k, other) == (layout, True), \
                (a, b, keep, sizes, other)
    assert decided > 100
