"""What planning costs may not change: the schedules chosen (searches that skip candidates
pick what the full search picks), and the schedules and plans kept for reuse are the ones
that would be made again."""
import numpy as np
import pytest

from skcontract.kernels.resolve import resolve_gemm
from skcontract.schedule import DeviceInfo, GemmProblem, schedule_problem
from skcontract.schedule import decompose as D
from skcontract.schedule import scheduler as S
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
