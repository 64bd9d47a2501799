"""The split table: the one format the scheduler writes and every executor reads.

A Schedule is data. The host builds it once per (problem, device); the CPU emulator and
the GPU kernels both walk the same table, so there is no second copy of the decomposition
arithmetic anywhere (docs/design/architecture.md, "the schedule is data").

Layout (numpy int32, C-contiguous, shape ``(num_splits, NUM_COLUMNS)``):

* rows are grouped by CTA; inside a CTA they are in the order that CTA executes them
  (splits that only publish come before splits that wait);
* ``cta_offsets`` (int32, shape ``(grid + 1,)``) is the CSR index: CTA ``c`` executes rows
  ``cta_offsets[c] : cta_offsets[c + 1]``.

Columns (all element coordinates, not tile indices):

========== ===============================================================================
BATCH      batch entry ``l`` of the output tile (0 for a plain GEMM)
M0, N0     first row / column of the output tile
BM, BN     tile extent clipped to the matrix (HyTiS rows may carry a smaller tile shape)
K0, K1     the split's reduction range ``[K0, K1)`` in elements, a multiple of BK at K0
FLAGS      bit FIRST (K0 == 0), bit FINAL (K1 == K), bit SMALL (a HyTiS latency-tile row:
           run it with the schedule's ``small_tile`` shape instead of ``tile``), bit
           SHARED_SUM (``arrival`` rows whose peers share the final sum, see below), bit
           RANGE (a range row, below)
TILE       fixup index of the tile (lock / arrival counter), -1 when the tile has one split
SLOT       workspace slot this split writes (deterministic: one per tile, shared by its
           splits; arrival: one per split), -1 when it writes none
PEERS      number of splits of this tile
SPLIT      index of this split inside its tile, in k order (0 .. PEERS-1)
========== ===============================================================================

Range rows (FLAG_RANGE) keep the table's size independent of the problem's: one row stands
for COUNT whole tiles that each have a single split (FIRST | FINAL, no fixup), the tiles at
positions ``FIRST_TILE + j * STRIDE`` (``j < COUNT``) of the tile walk: batch-major, each
batch entry's tiles in the schedule's swizzled raster order (:mod:`.swizzle`). Their columns
are RANGE_FIRST (M0), RANGE_COUNT (N0), RANGE_STRIDE (BM, possibly negative), K0 = 0,
K1 = K, TILE = SLOT = -1, PEERS = 1, SPLIT = 0, BATCH = BN = 0. A CTA runs them in place in
its row order; a data-parallel schedule is one range row per CTA. Grouped GEMMs and HyTiS's
re-tiled waves list their tiles instead. ``Schedule.expanded()`` gives the equivalent table
without range rows (what the emulator, the checks and the pictures read).

Fixup protocols keyed by these columns, one per reduction mode. The kernels
(``fixup.cuh``) and the CPU emulator (:mod:`.emulate`) run these same steps; a tile with
PEERS == 1 (TILE == -1) simply stores its result under every protocol.

* ``deterministic``: lock[TILE] counts K *elements* already folded in. A non-first split
  waits until ``lock == K0``; a non-final split adds (or, if FIRST, stores) into
  workspace[SLOT] and publishes ``lock = K1``; the FINAL split adds workspace[SLOT] into its
  accumulators, runs the epilogue and resets ``lock = 0``.
* ``arrival``: every split stores into its own workspace[SLOT], then increments
  counter[TILE]; the split that sees ``PEERS - 1`` sums the PEERS slots of its tile in
  SPLIT order, runs the epilogue and resets the counter to 0. Nobody waits.
* ``arrival`` with FLAG_SHARED_SUM (the scheduler sets it when every CTA is resident): the
  peers *share* that sum instead of leaving it to one CTA. Each split stores its slot and
  increments counter[TILE] where it is computed (no wait). After its last row the CTA walks
  its SHARED_SUM rows again: it waits until counter[TILE] reads ``>= PEERS``, sums its share
  ``[s, s + 1) * SLOT_ELEMS / PEERS`` of the PEERS slots (a fixed order: bitwise
  reproducible), runs the epilogue on that share of the tile and increments the counter
  again; the split that sees ``2 * PEERS - 1`` resets the counter to 0. One parallel pass
  instead of a chain of PEERS serial merges, and the tile's stores spread over its peers.
  (The Dot kernels, whose epilogue reduces across the tile, write the summed shares into the
  tile's first slot ``SLOT - SPLIT``; the split that sees ``2 * PEERS - 1`` loads the
  tile and runs the epilogue.)
  Since a CTA arrives on all its tiles before it waits on any, only co-residency is needed
  (:func:`..check.validate_schedule` checks it), not an order of visits.
* ``cluster`` (the aligned split only): the PEERS splits of a tile are the PEERS CTAs of one
  cluster (CTA ``c`` is split ``c % PEERS``, its cluster rank). Each keeps its partial tile in
  its own shared memory and signals every peer; once all PEERS partials are there, split
  ``s`` sums its share ``[s, s + 1) * SLOT_ELEMS / PEERS`` of them in SPLIT order (bitwise
  reproducible), reading the peers' shared memory, runs the epilogue on that share, and
  waits until every peer has read its own partial before it exits. No workspace, no locks
  (SLOT is -1); no CTA waits on one outside its cluster, whose CTAs the hardware keeps
  resident together.
* ``atomic``: each split adds its partial tile into staging[TILE] (fp32 / fp64 / int32
  accumulators, zero at the start of every launch) with device atomics, then increments
  counter[TILE]; the split that sees ``PEERS - 1`` loads the sum, stores zeros back into
  staging[TILE], resets the counter to 0 and runs the epilogue. Nobody waits; the order of
  the additions varies from run to run. SLOT is -1.

Every protocol leaves its locks, counters and staging slots at zero when the launch ends,
so buffers are zeroed once when allocated and never before a launch.

In ``deterministic`` mode every split of a fixup tile carries the tile's SLOT, including the
FINAL split, which only *reads* it. In ``arrival`` mode the PEERS slots of a tile are
contiguous: ``SLOT - SPLIT`` is the first. For a grouped GEMM, BATCH is the group index; K
(for FINAL) is that group's K.

This module is the one definition of the columns, the flags and the protocol codes; the
kernels' ``sk_scheduler.cuh`` / ``fixup.cuh`` spell the same names as C++ enums, and
``tests/cpu/test_table_protocol.py`` checks that they agree. The protocols themselves are
described in docs/design/stream_k.md.
"""

COLUMN_NAMES = ("batch", "m0", "n0", "bm", "bn", "k0", "k1", "flags", "tile", "slot",
                "peers", "split")
"""The columns in order; ``sk_scheduler.cuh`` names them ``COL_<NAME>``."""
NUM_COLUMNS = len(COLUMN_NAMES)
INDEX_HEADROOM = 2**20
"""How far the kernels' 32-bit index arithmetic runs past a table value: a tile's extent
(``M + BM - 1``, ``m0 + BM``), a Dot sweep's unrolled loads past a split's end."""
INDEX_MAX = 2**31 - 1 - INDEX_HEADROOM
"""The largest value a table entry holds: the kernels read the table as 32-bit ints and
compute a little past its values (:data:`INDEX_HEADROOM`), so a problem whose M, N, K or
batch, or whose tile walk, reaches beyond has no schedule (:class:`TableOverflow`; the GPU
backend runs such a step on its documented fallback)."""


class TableOverflow(ValueError):
    """A problem or its split table reaches beyond :data:`INDEX_MAX`: the kernels' 32-bit
    indices would wrap."""


BATCH, M0, N0, BM, BN, K0, K1, FLAGS, TILE, SLOT, PEERS, SPLIT = range(NUM_COLUMNS)

FLAGS_BY_NAME = {"first": 1, "final": 2, "small": 4, "shared_sum": 8, "range": 16}
"""The FLAGS bits; ``sk_scheduler.cuh`` names them ``FLAG_<NAME>``."""
FLAG_FIRST = FLAGS_BY_NAME["first"]
FLAG_FINAL = FLAGS_BY_NAME["final"]
FLAG_SMALL = FLAGS_BY_NAME["small"]
FLAG_SHARED_SUM = FLAGS_BY_NAME["shared_sum"]
FLAG_RANGE = FLAGS_BY_NAME["range"]

RANGE_FIRST, RANGE_COUNT, RANGE_STRIDE = M0, N0, BM
"""The columns a range row keeps its tiles in; ``sk_scheduler.cuh`` names them
``COL_RANGE_FIRST`` / ``COL_RANGE_COUNT`` / ``COL_RANGE_STRIDE``."""
RANGE_COLUMNS = {"range_first": RANGE_FIRST, "range_count": RANGE_COUNT,
                 "range_stride": RANGE_STRIDE}

RASTER_M_BIT = 8
"""A kernel receives the tile walk as one int: ``log_swizzle | (raster == "M") << 8``."""


def tile_order_code(log_swizzle: int, raster: str) -> int:
    """The tile walk as the kernels' ``tile_order`` argument (see RASTER_M_BIT)."""
    return int(log_swizzle) | (int(raster == "M") << RASTER_M_BIT)

PROTOCOL_CODES = {"none": 0, "atomic": 1, "deterministic": 2, "arrival": 3, "cluster": 4}
"""A kernel's fixup protocol (its ``REDUCTION`` template constant): ``none`` for tables whose
every tile has one split, else the schedule's reduction mode. ``fixup.cuh`` names them
``REDUCTION_<NAME>``."""


def protocol(table, reduction) -> str:
    """The protocol a kernel needs to run ``table`` under ``reduction``: ``"none"`` when no
    tile has more than one split (TILE is -1 on every row)."""
    tiles = table[:, TILE]
    if len(tiles) == 0 or int(tiles.max()) < 0:
        return "none"
    return str(reduction)
