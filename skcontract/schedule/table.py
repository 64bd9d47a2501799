"""The split table: the one format the scheduler writes and every executor reads.

A Schedule is data. The host builds it once per (problem, device); the CPU emulator and
the GPU kernels both walk the same table, so there is no second copy of the decomposition
arithmetic anywhere (ARCHITECTURE.md, "the schedule is data").

Layout (numpy int32, C-contiguous, shape ``(num_splits, NUM_COLUMNS)``):

* rows are grouped by CTA; inside a CTA they are in the order that CTA executes them
  (splits that only publish come before splits that wait, STREAM_K.md section 3);
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
           SHARED_SUM (``arrival`` rows whose peers share the final sum, see below)
TILE       fixup index of the tile (lock / arrival counter), -1 when the tile has one split
SLOT       workspace slot this split writes (deterministic: one per tile, shared by its
           splits; aligned: one per split), -1 when it writes none
PEERS      number of splits of this tile
SPLIT      index of this split inside its tile, in k order (0 .. PEERS-1)
========== ===============================================================================

Fixup protocols keyed by these columns (STREAM_K.md section 3):

* ``deterministic``: lock[TILE] counts K *elements* already folded in. A non-first split
  waits until ``lock == K0``; a non-final split adds (or, if FIRST, stores) into
  workspace[SLOT] and publishes ``lock = K1``; the FINAL split adds workspace[SLOT] into its
  accumulators, runs the epilogue and resets ``lock = 0``.
* ``aligned`` (reduction ``arrival``): every split stores into its own workspace[SLOT], then
  increments counter[TILE]; the split that sees ``PEERS - 1`` sums the PEERS slots of its
  tile in SPLIT order, runs the epilogue and resets the counter to 0. Nobody waits.
* ``arrival`` with FLAG_SHARED_SUM (the scheduler sets it when every CTA is resident): the
  peers *share* that sum instead of leaving it to one CTA. Each split stores its slot and
  increments counter[TILE] where it is computed (no wait). After its last row the CTA walks
  its SHARED_SUM rows again: it waits until counter[TILE] reads ``>= PEERS``, sums its share
  ``[s, s + 1) * SLOT_ELEMS / PEERS`` of the PEERS slots (a fixed order: bitwise
  reproducible) into the tile's first slot ``SLOT - SPLIT`` and increments the counter
  again; the split that sees ``2 * PEERS - 1`` loads the summed slot, runs the epilogue and
  resets the counter to 0. One parallel pass instead of a chain of PEERS serial merges.
  Since a CTA arrives on all its tiles before it waits on any, only co-residency is needed
  (:func:`..check.validate_schedule` checks it), not an order of visits.
* ``atomic``: each split adds into the (zeroed) output or an fp32/fp64 staging buffer.
  TILE is still filled in (it identifies the tile's splits) but no lock is allocated
  (``Schedule.num_locks == 0``) and SLOT is -1; a tile with PEERS == 1 simply stores.

Notes (scheduler, issue 3): in ``deterministic`` mode every split of a fixup tile carries
the tile's SLOT, including the FINAL split, which only *reads* it. In ``aligned`` mode the
PEERS slots of a tile are contiguous: ``SLOT - SPLIT`` is the first. For a grouped GEMM,
BATCH is the group index; K (for FINAL) is that group's K.
"""

BATCH, M0, N0, BM, BN, K0, K1, FLAGS, TILE, SLOT, PEERS, SPLIT = range(12)
NUM_COLUMNS = 12

FLAG_FIRST = 1
FLAG_FINAL = 2
FLAG_SMALL = 4  # added with the scheduler (issue 3); the columns are unchanged
FLAG_SHARED_SUM = 8  # arrival rows whose peers share the final sum (parallel split reduction)

COLUMN_NAMES = ("batch", "m0", "n0", "bm", "bn", "k0", "k1", "flags", "tile", "slot",
                "peers", "split")
