"""The scheduler: GEMM-class problems -> Stream-K family decompositions, as data, on the tile
options its caller gives (the GPU's: :func:`skcontract.kernels.resolve.resolve_gemm`).

>>> from skcontract.schedule import schedule_gemm, emulate, DeviceInfo
>>> s = schedule_gemm(2176, 1024, 4096, tile=(128, 128, 64))
>>> s.mode, s.grid, s.table.shape[1]
('hybrid', 132, 12)

See docs/schedules.md for the decompositions with pictures.
"""
from .applicability import can_apply_stream_k
from .check import InvalidSchedule, validate_schedule
from .device import DeviceInfo
from .draw import draw_schedule
from .emulate import emulate, timeline
from .heuristics import MIN_ITERS_PER_SPLIT, CostModel
from .scheduler import clear_schedule_cache, schedule_gemm, schedule_problem
from .types import (ALIGNED, ARRIVAL, ATOMIC, DATA_PARALLEL, DETERMINISTIC, HYBRID, HYTIS, MODES,
                    SPLIT_K, STREAM_K, Candidate, GemmProblem, Mode, Protocol, ProtocolViolation,
                    Schedule, TileOption,
                    ScheduleDeadlock, ScheduleError, Split, conv_problem, grouped_problem)


__all__ = [
    "schedule_gemm", "schedule_problem", "clear_schedule_cache", "emulate", "timeline",
    "draw_schedule", "can_apply_stream_k", "validate_schedule", "DeviceInfo", "CostModel",
    "GemmProblem", "grouped_problem", "conv_problem", "Schedule", "Split", "Candidate",
    "TileOption", "Mode", "Protocol",
    "ScheduleError", "ScheduleDeadlock", "ProtocolViolation", "InvalidSchedule",
    "MIN_ITERS_PER_SPLIT", "MODES", "DATA_PARALLEL", "SPLIT_K", "STREAM_K", "HYBRID",
    "ALIGNED", "HYTIS", "ATOMIC", "DETERMINISTIC", "ARRIVAL",
]
