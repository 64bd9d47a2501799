"""The offer gates: which products an entry is offered to (planning policy, not kernel facts).

An entry's kernel runs any product of its dtype; the gates keep the cost model from picking
it where it prices the entry well but the entry runs slower than another, because the model
has no term for what decides there (the L2's bandwidth, an SM's second CTA hiding an
epilogue, the loads of a memory-bound product). Each gate is an entry field
(:class:`.entry.Entry`: ``min_waves``, ``max_waves``, ``min_k_iterations``,
``splits_only``, ``b_off_lines_only``) whose value is set here, or a rule over the product
(:func:`streaming_wanted`). The timed runs behind each value are in
docs/benchmarks/calibration.md, "The kernel catalogue".
"""
from __future__ import annotations

LINE_BYTES = 128
"""The L2 line a TMA load reads rows in: a row that starts off one reads a line more."""

MEMORY_BOUND_REUSE = 128
"""A product whose operand elements are used fewer times than this on average (2 M N K over
the elements A and B hold: 2 M N / (M + N) for a GEMM, more for a convolution, whose A
reads each input pixel R x S times; decode and other skinny GEMMs, a late layer of batch
1) is bound by streaming its operands, which the cost model (flops per k-iteration) does
not see: it is offered only its dtype's streaming entry
(:attr:`.entry.Entry.streams`), if there is one, and the model picks the mode."""

WGMMA_STREAMING_TILE = (64, 64)
"""The Wgmma tile that streams memory-bound products: 64 columns of weights a tile give a
decode product tiles enough for Stream-K to spread over every SM with 16 KB partial tiles.
It runs one CTA an SM with 8 stages."""

STREAMING_MAX_WAVES = 2
"""The memory-bound rule gives a product only the streaming entry while that entry's output
tiles fill at most this many waves of SMs: it pays where few tiles must spread over every
SM (decode); a tall product of many tiles (a 1 x 1 convolution's 100352 x 64 x 256) streams
its operands as well on the wider tiles the cost model picks."""

STREAMING_WAVE_TILES = ((64, 64), (64, 128))
"""The Wgmma tiles, narrowest first, that a memory-bound product's one data-parallel wave may
run on (:func:`streaming_wave_tile`): a wider tile keeps more of B's bytes in flight a CTA,
so fewer CTAs stream it as fast. (The rule sees products of at most
:data:`STREAMING_MAX_WAVES` waves of 64 x 64 tiles, whose 64 x 128 tiles fit one wave.)"""

STREAMING_WAVE_MIN_SHARE = 0.5
"""The share of the SMs a one-wave streaming tile's CTAs must fill (:func:`streaming_wave_tile`):
a 64 x 128 wave on half the SMs of an H100 streamed 16 x 8192 x 8192 12% slower than the
64 x 64 tiles on all of them; fewer tiles than this are spread over every SM by the
streaming entry's Stream-K."""

WGMMA_PAIRED_MIN_WAVES = 1.0
"""The paired 128 x 64 entry (3 stages, two CTAs an SM) is offered only where its tiles
fill a wave of its resident CTAs: two CTAs on an SM hide each other's epilogue behind their
mainloops, which pays once every SM has two tiles to run; alone on an SM its three stages
lose to the eight-stage entry."""

WGMMA_PAIR_MAX_WAVES = 1.5
"""The cluster pairs are offered only to products whose unit tiles fill at most this many
waves of pairs. There the pair's shared B loads pay, and the cost model, which has no term
for the L2's bandwidth, picks them where they run faster; on products of more waves it
would pick them where the single-CTA tiles run faster."""

WGMMA_PAIR_MIN_K_ITERATIONS = {(128, 128): 128}
"""The k-iterations a tile's loop must run for the pair of (BM, BN) CTAs to be offered
(:attr:`.entry.Entry.min_k_iterations`; pairs not named: any). The 128 x 128 pair's
split k-iterations run faster than the single tile's, but on loops of 64 the pair runs
slower on every product timed; on loops of 128 and more it runs faster where auto splits
the single tile."""

WGMMA_PAIR_SPLITS_ONLY = ((128, 128),)
"""The pairs of (BM, BN) CTAs planned only in schedules that split their tiles
(:attr:`.entry.Entry.splits_only`): on whole tiles a wave of the 128 x 128 pair runs
no faster than the single 128 x 128 tile's; its efficiency is its split k-iterations'
rate."""


def output_tiles(m: int, n: int, batch: int, tile) -> int:
    """Output tiles of a batch of m x n products on ``tile`` ((BM, BN, ...))."""
    return batch * -(-m // tile[0]) * -(-n // tile[1])


def memory_bound(m: int, n: int, k: int = 1, operand_elems: int | None = None) -> bool:
    """Whether an m x n x k product is memory-bound (:data:`MEMORY_BOUND_REUSE`);
    ``operand_elems``: the elements A and B hold where that is not (m + n) k (an implicit
    GEMM's A is a view of fewer elements)."""
    elems = (m + n) * k if operand_elems is None else operand_elems
    return 2 * m * n * k < MEMORY_BOUND_REUSE * elems


def streaming_wanted(m: int, n: int, k: int, batch: int, sms: int,
                     operand_elems: int | None = None) -> bool:
    """Whether the memory-bound rule offers a product only its streaming entry: memory-bound
    (:func:`memory_bound`) and few streaming tiles (:data:`STREAMING_MAX_WAVES`)."""
    tiles = output_tiles(m, n, batch, WGMMA_STREAMING_TILE)
    return tiles <= STREAMING_MAX_WAVES * sms and memory_bound(m, n, k, operand_elems)


def streaming_wave_tile(m: int, n: int, batch: int, sms: int, tiles) -> tuple | None:
    """The (BM, BN) of ``tiles`` (those a dtype has entries of) that runs a memory-bound
    product in one data-parallel wave: the narrowest of :data:`STREAMING_WAVE_TILES` whose
    output tiles fill between :data:`STREAMING_WAVE_MIN_SHARE` of the SMs and all of them;
    None where none does (the streaming entry's schedule, picked by the model, runs it).
    Where the 64 x 64 tiles overflow a wave, Stream-K's split tiles and their partial sums
    ran 4 x 13824 x 5120 and 8 x 11008 x 4096 10-13% slower on an H100 than one wave of
    64 x 128 tiles (docs/benchmarks/calibration.md, "Decode products")."""
    for tile in STREAMING_WAVE_TILES:
        count = output_tiles(m, n, batch, tile)
        if tile in tiles and STREAMING_WAVE_MIN_SHARE * sms <= count <= sms:
            return tile
    return None
