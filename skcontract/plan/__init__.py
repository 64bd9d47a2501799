"""Planning: contraction path, step classification, frozen Plan/Step values."""
from .classify import GEMM_KINDS, Kind, compute_dtype
from .path import find_path, validate_path
from .plan import Plan, Step, build_plan

__all__ = ["Kind", "GEMM_KINDS", "compute_dtype",
           "find_path", "validate_path", "Plan", "Step", "build_plan"]
