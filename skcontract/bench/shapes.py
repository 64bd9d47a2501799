"""Shape-class benchmark: the products users bring, class by class, against the best peer.

``python -m skcontract bench shapes [--out DIR] [--name NAME] [--reps N] [--classes A,B]
[--cpu]``

Each class holds shapes taken from real models and computations (the ``source`` of each
row). Per row, on the same random CuPy arrays (torch sees them through DLPack):

- ``einsum`` rows: ``us`` is the device time per call of a ``contract_expression`` planned
  once, ``peer_us`` torch.einsum's (cuBLAS behind its products), both by CUDA-graph replay
  (:mod:`.timing`); ``call_us`` / ``peer_call_us`` their host wall time per call;
- ``gemm-torch`` / ``gemm-cupy`` rows: ``us`` is the wall time per call of
  :func:`~skcontract.kernels.gemm.gemm` on torch tensors / CuPy arrays, ``peer_us`` that of
  torch.matmul / cupy.matmul on the same operands: what a Python caller feels;
- ``ratio``: ``peer_us / us`` (above 1: we are faster); ``gbps``: the operands read once and
  the result written once over ``us``, for the memory-bound classes (:data:`MEMORY_BOUND`);
  ``rel_err``: against float64, checked before timing.

- ``conv-*`` rows (:data:`CONV_GPU_CASES`): ``conv2d`` on CUDA torch tensors, float16 or
  bfloat16 channels-last unless the row says NCHW; ``us`` / ``peer_us`` device time
  per call of ours and of cuDNN (torch's conv2d with ``cudnn.benchmark`` on, TF32 off), both
  by CUDA-graph replay; ``gbps`` on depthwise rows (input, filters and output moved once);
- ``--cpu``: the ``conv-cpu-*`` rows instead (:data:`CONV_CPU_CASES`, float32): our
  CPU convolution against torch's, each side's best of ``reps`` wall times over alternating
  rounds, into ``shapes-cpu``; no GPU needed.

The run also times a device-to-device copy (``copy_gbps``), the bandwidth the memory-bound
rows are held to. Writes ``<name>.json`` ({"date", "commit", "device", "copy_gbps",
"rows"}) and ``<name>.md`` into ``--out``; the default name carries the device
(``shapes-h100``, ``shapes-h200``). bfloat16 is left out: CuPy has no bfloat16 arrays, and
einsum on bfloat16 torch tensors computes in float32.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..contract import contract_expression
from ..kernels.gemm import gemm
from ..ops.conv2d import conv_geometry
from .einsum import gbps, traffic_bytes
from .timing import (DEFAULT_REPS, call_time_us, calls_for, device_name, device_time_us,
                     expression_times, geomean, guarded, rel_err, run_commit, torch_graph_us)


class Case(NamedTuple):
    cls: str
    op: str
    expr: str
    shapes: tuple
    dtype: str
    source: str


def _e(cls, expr, shapes, dtype, source):
    return Case(cls, "einsum", expr, tuple(tuple(s) for s in shapes), dtype, source)


CASES = (
    _e("rows-off-16B", "mk,kn->mn", [(512, 768), (768, 50257)], "float16",
       "GPT-2 LM head, 512 tokens, vocabulary 50257"),
    _e("rows-off-16B", "mk,kn->mn", [(2048, 4096), (4096, 32001)], "float16",
       "LLaMA-7B LM head with one added token"),
    _e("rows-off-16B", "bhqd,bhkd->bhqk", [(32, 12, 197, 64), (32, 12, 197, 64)], "float16",
       "ViT-B/16 attention scores, 197 tokens, batch 32"),
    _e("rows-off-16B", "bhqk,bhkd->bhqd", [(32, 12, 197, 197), (32, 12, 197, 64)],
       "float16", "ViT-B/16 attention times V (K = 197)"),
    _e("tiny-batched", "bij,bjk->bik", [(8192, 16, 16), (8192, 16, 16)], "float32",
       "16 x 16 transfer matrices (1-D lattice models)"),
    _e("tiny-batched", "bij,bjk->bik", [(100000, 3, 3), (100000, 3, 3)], "float32",
       "3 x 3 rotations composed (molecular dynamics)"),
    _e("tiny-batched", "bij,bjk->bik", [(2048, 64, 64), (2048, 64, 64)], "float16",
       "64 x 64 blocks (block-sparse attention)"),
    _e("tiny-batched", "bij,bj->bi", [(65536, 8, 8), (65536, 8)], "float32",
       "8-state Kalman filter predictions"),
    _e("tall-narrow", "ij,jk->ik", [(4194304, 8), (8, 8)], "float32",
       "a random 3-regular graph's bond-2 step, 2^22 x 8 x 8 (a sliced network)"),
    _e("tall-narrow", "ij,jk->ik", [(8294400, 3), (3, 3)], "float32",
       "a 4K video frame's RGB to YCbCr"),
    _e("tall-narrow", "nk,jk->nj", [(1048576, 4), (4, 4)], "float64",
       "a 4 x 4 transform of a million homogeneous points"),
    _e("tall-narrow", "ij,jk->ik", [(2097152, 32), (32, 32)], "float16",
       "a width-32 hidden layer of a fully fused MLP over 2M ray samples"),
    _e("skinny", "mk,kn->mn", [(8, 4096), (4096, 11008)], "float16",
       "LLaMA-7B MLP up, decoding 8 sequences"),
    _e("skinny", "mk,kn->mn", [(16, 8192), (8192, 8192)], "float16",
       "LLaMA-70B attention output, decoding 16 sequences"),
    _e("skinny", "mk,kn->mn", [(4, 5120), (5120, 13824)], "float16",
       "LLaMA-13B MLP up, decoding 4 sequences"),
    _e("long-k", "tk,tn->kn", [(16384, 768), (16384, 768)], "float16",
       "BERT-base weight gradient over 16384 tokens"),
    _e("long-k", "tk,tn->kn", [(65536, 256), (65536, 256)], "float32",
       "a 256-wide MLP's weight gradient over 65536 samples"),
    _e("long-k", "tk,tn->kn", [(32768, 1024), (32768, 128)], "float16",
       "a LoRA down-projection's gradient (rank 128)"),
    _e("mid-square", "mk,kn->mn", [(4096, 768), (768, 2304)], "float16",
       "BERT-base fused QKV, 4096 tokens"),
    _e("mid-square", "mk,kn->mn", [(2048, 4096), (4096, 4096)], "float16",
       "LLaMA-7B attention projection, 2048 tokens"),
    _e("mid-square", "mk,kn->mn", [(2048, 1024), (1024, 4096)], "float16",
       "BERT-large MLP up, 2048 tokens"),
    _e("large", "mk,kn->mn", [(8192, 8192), (8192, 8192)], "float16", "8192 squared"),
    _e("large", "mk,kn->mn", [(4096, 8192), (8192, 28672)], "float16",
       "LLaMA-70B MLP up, 4096 tokens"),
    _e("large", "emk,ekn->emn", [(8, 1024, 4096), (8, 4096, 14336)], "float16",
       "Mixtral-8x7B experts, 1024 tokens each"),
    _e("exact-fp32", "mk,kn->mn", [(4096, 1024), (1024, 4096)], "float32",
       "BERT-large MLP up in float32"),
    _e("exact-fp32", "bij,bjk->bik", [(48, 512, 64), (48, 64, 512)], "float32",
       "attention scores in float32, 512 tokens, 48 heads"),
    _e("exact-fp32", "nd,md->nm", [(8192, 128), (8192, 128)], "float32",
       "Gaussian-process kernel matrix, 128 features"),
    _e("fp64", "mk,kn->mn", [(4096, 4096), (4096, 4096)], "float64",
       "quantum chemistry, 4096 basis functions"),
    _e("fp64", "bij,bjk->bik", [(64, 384, 384), (64, 384, 384)], "float64",
       "coupled-cluster blocks, 64 x 384^3"),
    _e("fp64", "pqrs,rs->pq", [(96, 96, 96, 96), (96, 96)], "float64",
       "Coulomb matrix from 96-orbital integrals"),
    _e("outer", "i,j->ij", [(4096,), (16384,)], "float32", "rank-one update"),
    _e("outer", "bi,bj->bij", [(64, 512), (64, 512)], "float16",
       "batched outer products (Shampoo statistics)"),
    _e("axis-reduction", "ijk->j", [(256, 4096, 64)], "float32",
       "per-channel sums over batch and positions"),
    _e("axis-reduction", "ij->j", [(16384, 4096)], "float16", "column sums of activations"),
    _e("transposed-out", "ik,kj->ji", [(4096, 1024), (1024, 4096)], "float16",
       "a product written transposed (backward of a projection)"),
    _e("transposed-out", "bmk,bkn->bnm", [(16, 512, 512), (16, 512, 512)], "float32",
       "batched products written transposed"),
    Case("gemm-torch", "gemm-torch", "mk,kn->mn", ((1024, 1024), (1024, 1024)), "float16",
         "gemm() on torch tensors, 1024 squared"),
    Case("gemm-torch", "gemm-torch", "mk,kn->mn", ((256, 768), (768, 768)), "float16",
         "gemm() on torch tensors, a small projection"),
    Case("gemm-cupy", "gemm-cupy", "mk,kn->mn", ((1024, 1024), (1024, 1024)), "float16",
         "gemm() on CuPy arrays, 1024 squared"),
    Case("gemm-cupy", "gemm-cupy", "mk,kn->mn", ((256, 768), (768, 768)), "float16",
         "gemm() on CuPy arrays, a small projection"),
)
"""The benchmark's rows, by class."""

class ConvCase(NamedTuple):
    """A convolution row: torch.nn.functional.conv2d's arguments, the dtype and the layout
    (NHWC: input and filters in torch's ``channels_last``)."""

    cls: str
    x: tuple
    w: tuple
    stride: int
    padding: int
    groups: int
    source: str
    dilation: int = 1
    dtype: str = "float32"
    layout: str = "NCHW"


CONV_CPU_CASES = (
    ConvCase("conv-cpu-dense", (8, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1,
             "ResNet-50 stage 1 3x3"),
    ConvCase("conv-cpu-dense", (8, 512, 7, 7), (512, 512, 3, 3), 1, 1, 1,
             "ResNet-50 stage 4 3x3"),
    ConvCase("conv-cpu-dense", (4, 128, 112, 112), (128, 128, 3, 3), 1, 1, 1,
             "VGG-16 block 2"),
    ConvCase("conv-cpu-pointwise", (8, 256, 56, 56), (64, 256, 1, 1), 1, 0, 1,
             "ResNet-50 stage 1 1x1 reduce"),
    ConvCase("conv-cpu-pointwise", (8, 96, 56, 56), (24, 96, 1, 1), 1, 0, 1,
             "MobileNetV2 block 2 projection"),
    ConvCase("conv-cpu-strided", (8, 128, 56, 56), (128, 128, 3, 3), 2, 1, 1,
             "ResNet-50 stage 2 3x3, stride 2"),
    ConvCase("conv-cpu-strided", (8, 3, 224, 224), (64, 3, 7, 7), 2, 3, 1,
             "ResNet-50 stem 7x7, stride 2"),
    ConvCase("conv-cpu-grouped", (8, 512, 14, 14), (512, 16, 3, 3), 1, 1, 32,
             "ResNeXt-50 32x4d stage 3"),
    ConvCase("conv-cpu-grouped", (8, 1024, 7, 7), (1024, 32, 3, 3), 1, 1, 32,
             "ResNeXt-50 32x4d stage 4"),
    ConvCase("conv-cpu-depthwise", (8, 144, 56, 56), (144, 1, 3, 3), 1, 1, 144,
             "MobileNetV2 block 3 depthwise 3x3"),
    ConvCase("conv-cpu-depthwise", (8, 96, 56, 56), (96, 1, 7, 7), 1, 3, 96,
             "ConvNeXt-T stage 1 depthwise 7x7"),
    ConvCase("conv-cpu-batch1", (1, 128, 28, 28), (128, 128, 3, 3), 1, 1, 1,
             "ResNet-50 stage 2 3x3, batch 1"),
    ConvCase("conv-cpu-batch1", (1, 64, 224, 224), (64, 64, 3, 3), 1, 1, 1,
             "VGG-16 block 1 second 3x3, batch 1"),
    ConvCase("conv-cpu-dilated", (4, 512, 28, 28), (512, 512, 3, 3), 1, 2, 1,
             "DeepLabV3 ResNet-50 stage 4 (output stride 8), dilation 2", dilation=2),
    ConvCase("conv-cpu-dilated", (4, 256, 33, 33), (256, 256, 3, 3), 1, 12, 1,
             "DeepLabV3 ASPP branch, dilation 12", dilation=12),
    ConvCase("conv-cpu-large-kernel", (4, 128, 56, 56), (128, 1, 31, 31), 1, 15, 128,
             "RepLKNet-31B stage 1 depthwise 31x31"),
    ConvCase("conv-cpu-large-kernel", (8, 64, 56, 56), (64, 1, 7, 7), 1, 9, 64,
             "VAN-B0 large-kernel attention, depthwise 7x7 dilation 3", dilation=3),
    ConvCase("conv-cpu-channels-last", (8, 144, 56, 56), (144, 1, 3, 3), 1, 1, 144,
             "MobileNetV2 block 3 depthwise 3x3, channels-last", layout="NHWC"),
    ConvCase("conv-cpu-channels-last", (8, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1,
             "ResNet-50 stage 1 3x3, channels-last", layout="NHWC"),
)
"""The CPU convolutions (``--cpu``), float32, NCHW unless the case says NHWC, against
torch's CPU convolution."""


def _gpu_conv(cls, x, w, stride, padding, groups, source, dilation=1, dtype="float16",
              layout="NHWC"):
    return ConvCase(cls, x, w, stride, padding, groups, source, dilation, dtype, layout)


CONV_GPU_CASES = (
    _gpu_conv("conv-dense", (32, 256, 14, 14), (256, 256, 3, 3), 1, 1, 1,
              "ResNet-50 stage 3 3x3, batch 32"),
    _gpu_conv("conv-dense", (8, 128, 128, 128), (128, 128, 3, 3), 1, 1, 1,
              "UNet encoder level 2 3x3", dtype="bfloat16"),
    _gpu_conv("conv-dense", (16, 256, 56, 56), (256, 256, 3, 3), 1, 1, 1,
              "VGG-16 block 3 3x3"),
    _gpu_conv("conv-pointwise", (64, 24, 56, 56), (144, 24, 1, 1), 1, 0, 1,
              "MobileNetV2 block 3 expansion 1x1"),
    _gpu_conv("conv-pointwise", (32, 512, 7, 7), (2048, 512, 1, 1), 1, 0, 1,
              "ResNet-50 stage 4 1x1 expansion"),
    _gpu_conv("conv-pointwise", (64, 240, 28, 28), (40, 240, 1, 1), 1, 0, 1,
              "EfficientNet-B0 stage 3 projection 1x1"),
    _gpu_conv("conv-grouped", (32, 128, 56, 56), (128, 4, 3, 3), 1, 1, 32,
              "ResNeXt-50 32x4d stage 1 3x3, 32 groups"),
    _gpu_conv("conv-grouped", (32, 256, 56, 56), (256, 8, 3, 3), 1, 1, 32,
              "ResNeXt-101 32x8d stage 1 3x3, 32 groups"),
    _gpu_conv("conv-grouped", (32, 512, 14, 14), (512, 16, 3, 3), 1, 1, 32,
              "ResNeXt-50 32x4d stage 3 3x3, 32 groups"),
    _gpu_conv("conv-grouped", (32, 1024, 7, 7), (1024, 32, 3, 3), 1, 1, 32,
              "ResNeXt-50 32x4d stage 4 3x3, 32 groups"),
    _gpu_conv("conv-grouped", (32, 240, 28, 28), (240, 24, 3, 3), 1, 1, 10,
              "RegNetY-1.6GF stage 2 3x3, group width 24"),
    _gpu_conv("conv-depthwise", (64, 144, 56, 56), (144, 1, 3, 3), 1, 1, 144,
              "MobileNetV2 block 3 depthwise 3x3"),
    _gpu_conv("conv-depthwise", (64, 240, 28, 28), (240, 1, 5, 5), 1, 2, 240,
              "EfficientNet-B0 stage 4 depthwise 5x5"),
    _gpu_conv("conv-depthwise", (32, 96, 56, 56), (96, 1, 7, 7), 1, 3, 96,
              "ConvNeXt-T stage 1 depthwise 7x7"),
    _gpu_conv("conv-depthwise", (64, 96, 112, 112), (96, 1, 3, 3), 2, 1, 96,
              "MobileNetV2 block 2 depthwise 3x3, stride 2"),
    _gpu_conv("conv-batch1", (1, 512, 28, 28), (512, 512, 3, 3), 1, 1, 1,
              "UNet bottleneck 3x3, one image"),
    _gpu_conv("conv-batch1", (1, 128, 56, 56), (128, 128, 3, 3), 1, 1, 1,
              "ResNet-50 stage 2 3x3, one image"),
    _gpu_conv("conv-dilated", (8, 256, 64, 64), (256, 256, 3, 3), 1, 2, 1,
              "DeepLabV3 layer 3 3x3, dilation 2", dilation=2),
    _gpu_conv("conv-dilated", (8, 256, 33, 33), (256, 256, 3, 3), 1, 6, 1,
              "DeepLabV3 ASPP 3x3, rate 6 (513-pixel crops)", dilation=6),
    _gpu_conv("conv-strided", (32, 256, 28, 28), (256, 256, 3, 3), 2, 1, 1,
              "ResNet-50 stage 3 downsampling 3x3, stride 2"),
    _gpu_conv("conv-strided", (32, 3, 224, 224), (64, 3, 7, 7), 2, 3, 1,
              "ResNet-50 stem 7x7, stride 2"),
    _gpu_conv("conv-large-kernel", (16, 256, 28, 28), (256, 1, 13, 13), 1, 6, 256,
              "RepLKNet-31B stage 2 depthwise 13x13"),
    _gpu_conv("conv-large-kernel", (16, 64, 56, 56), (64, 64, 5, 5), 1, 2, 1,
              "Inception 5x5 branch"),
    _gpu_conv("conv-fp32", (16, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1,
              "ResNet-18 stage 1 3x3, float32 NCHW", dtype="float32", layout="NCHW"),
    _gpu_conv("conv-fp32", (8, 64, 112, 112), (64, 64, 3, 3), 1, 1, 1,
              "UNet encoder level 1 3x3, float32 NCHW", dtype="float32", layout="NCHW"),
    _gpu_conv("conv-nchw", (64, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1,
              "ResNet-18 stage 1 3x3, float16 NCHW (torch's default layout)", layout="NCHW"),
    _gpu_conv("conv-nchw", (32, 128, 28, 28), (128, 128, 3, 3), 1, 1, 1,
              "ResNet-50 stage 2 3x3, bfloat16 NCHW", dtype="bfloat16", layout="NCHW"),
    _gpu_conv("conv-nchw", (64, 24, 56, 56), (144, 24, 1, 1), 1, 0, 1,
              "MobileNetV2 block 3 expansion 1x1, float16 NCHW", layout="NCHW"),
)
"""The GPU convolutions (classes ``conv-*``): float16/bfloat16 channels-last unless a row says
NCHW, against cuDNN through torch (``cudnn.benchmark`` on, TF32 off)."""

GPU_CASES = CASES + CONV_GPU_CASES
"""Every GPU row: the products, then the convolutions."""

MEMORY_BOUND = frozenset({"tiny-batched", "tall-narrow", "outer", "axis-reduction"})
"""Classes whose rows are held to the copy bandwidth (``gbps``), besides their peer."""

COPY_BYTES = 1 << 30
"""Bytes of the device-to-device copy the run times (``copy_gbps``)."""

ROW_KEYS = ("class", "op", "expr", "shapes", "dtype", "source", "us", "peer", "peer_us",
            "ratio", "call_us", "peer_call_us", "gbps", "rel_err")
"""A row's measured keys (a run adds ``commit``, the commit it was measured at)."""


def _operands(case: Case):
    import cupy  # optional dependency: only the GPU path needs CuPy

    rs = cupy.random.RandomState(4321)
    return [rs.standard_normal(s, dtype=cupy.float32).astype(case.dtype) for s in case.shapes]


def measure(case: Case, reps: int, log) -> dict:
    """One row (needs CuPy, torch and a GPU)."""
    import cupy  # optional dependency: only the GPU path needs CuPy
    import torch  # the benchmark's peer; not a dependency of the library

    ops = _operands(case)
    tops = [torch.from_dlpack(x) for x in ops]
    ref = cupy.einsum(case.expr, *[x.astype(cupy.float64) for x in ops])
    row = dict(zip(("class", "op", "expr", "shapes", "dtype", "source"),
                   (case.cls, case.op, case.expr, [list(s) for s in case.shapes], case.dtype,
                    case.source)))
    if case.op == "einsum":
        row.update(_einsum_row(case, ops, tops, ref, reps, log))
    else:
        row.update(_gemm_call_row(case, ops, tops, ref, log))
    row["ratio"] = row["peer_us"] / row["us"] if row.get("us") and row.get("peer_us") \
        else None
    if case.cls in MEMORY_BOUND:
        row["gbps"] = gbps(traffic_bytes(case.expr, case.shapes, np.dtype(case.dtype).itemsize),
                           row["us"])
    return {k: row.get(k) for k in ROW_KEYS}


def _einsum_row(case: Case, ops, tops, ref, reps: int, log) -> dict:
    import cupy  # optional dependency: only the GPU path needs CuPy
    import torch  # the benchmark's peer; not a dependency of the library

    ours = contract_expression(case.expr, *case.shapes, dtype=np.dtype(case.dtype))
    times = expression_times(lambda: ours(*ops), ref, cupy.cuda.Stream(non_blocking=True),
                             reps, log)
    calls = times.pop("calls")
    row = {"peer": "torch.einsum", **times}
    row["peer_us"] = guarded(log, "torch.einsum device time", lambda: torch_graph_us(
        lambda: torch.einsum(case.expr, *tops), calls, reps))
    row["peer_call_us"] = guarded(log, "torch.einsum call", lambda: call_time_us(
        lambda: torch.einsum(case.expr, *tops), torch.cuda.synchronize))
    return row


def _gemm_call_row(case: Case, ops, tops, ref, log) -> dict:
    import cupy  # optional dependency: only the GPU path needs CuPy
    import torch  # the benchmark's peer; not a dependency of the library

    if case.op == "gemm-torch":
        a, b = tops
        peer, peer_name, sync = torch.matmul, "torch.matmul", torch.cuda.synchronize
    else:
        a, b = ops
        peer, peer_name, sync = cupy.matmul, "cupy.matmul", cupy.cuda.Device().synchronize
    row = {"peer": peer_name}
    row["rel_err"] = guarded(log, "gemm", lambda: rel_err(cupy.asarray(gemm(a, b)), ref))
    row["us"] = row["call_us"] = guarded(log, "gemm call",
                                         lambda: call_time_us(lambda: gemm(a, b), sync))
    row["peer_us"] = row["peer_call_us"] = guarded(
        log, f"{peer_name} call", lambda: call_time_us(lambda: peer(a, b), sync))
    return row


def measure_conv_cpu(case: ConvCase, reps: int, log) -> dict:
    """One CPU convolution row: each side's best wall time (:func:`best_wall_pair_us`),
    ours on NumPy arrays and torch's on its tensors, both channels-last where the case is
    NHWC."""
    import torch  # the benchmark's peer; not a dependency of the library

    from ..ops.conv2d import conv2d
    rng = np.random.default_rng(4321)
    x = rng.standard_normal(case.x).astype(np.float32)
    w = rng.standard_normal(case.w).astype(np.float32)
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    if case.layout == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        tx = tx.contiguous(memory_format=torch.channels_last)
        tw = tw.contiguous(memory_format=torch.channels_last)
    args = (None, case.stride, case.padding, case.dilation, case.groups)
    ref = torch.nn.functional.conv2d(tx.double(), tw.double(), *args).numpy()
    dilated = f" dilation {case.dilation}" if case.dilation != 1 else ""
    layout = " channels-last" if case.layout == "NHWC" else ""
    row = dict(zip(("class", "op", "expr", "shapes", "dtype", "source", "peer"),
                   (case.cls, "conv2d-cpu", f"conv2d stride {case.stride} padding "
                    f"{case.padding}{dilated} groups {case.groups}{layout}",
                    [list(case.x), list(case.w)], "float32", case.source, "torch (CPU)")))
    got = guarded(log, "conv2d", lambda: conv2d(x, w, *args))
    row["rel_err"] = None if got is None else float(
        np.linalg.norm(got - ref) / np.linalg.norm(ref))
    ours, peer = (lambda: conv2d(x, w, *args)), \
        (lambda: torch.nn.functional.conv2d(tx, tw, *args))
    times = guarded(log, "conv2d", lambda: best_wall_pair_us(ours, peer, reps))
    row["us"] = row["call_us"] = None if times is None else times[0]
    row["peer_us"] = row["peer_call_us"] = None if times is None else times[1]
    row["ratio"] = row["peer_us"] / row["us"] if row["us"] and row["peer_us"] else None
    return {k: row.get(k) for k in ROW_KEYS}


def measure_conv_gpu(case: ConvCase, reps: int, log) -> dict:
    """One GPU convolution row on CUDA torch tensors: device time per call of ours and of
    cuDNN by CUDA-graph replay (the caller turns ``cudnn.benchmark`` on and TF32 off), host
    wall time per call beside."""
    import torch  # the benchmark's peer; not a dependency of the library
    import torch.nn.functional as F

    from ..ops.conv2d import conv2d
    gen = torch.Generator(device="cuda").manual_seed(4321)
    dt = getattr(torch, case.dtype)
    fan_in = case.w[1] * case.w[2] * case.w[3]
    x = torch.randn(case.x, device="cuda", generator=gen).to(dt)
    w = (torch.randn(case.w, device="cuda", generator=gen) / fan_in ** 0.5).to(dt)
    if case.layout == "NHWC":
        x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
    args = (None, case.stride, case.padding, case.dilation, case.groups)
    ref = F.conv2d(x.double(), w.double(), *args)
    row = dict(zip(("class", "op", "expr", "shapes", "dtype", "source", "peer"),
                   (case.cls, "conv2d", f"conv2d {case.layout} stride {case.stride} padding "
                    f"{case.padding} dilation {case.dilation} groups {case.groups}",
                    [list(case.x), list(case.w)], case.dtype, case.source, "cuDNN")))
    ours, peer = (lambda: conv2d(x, w, *args)), (lambda: F.conv2d(x, w, *args))
    got = guarded(log, "conv2d", ours)
    row["rel_err"] = None if got is None else float(
        torch.linalg.vector_norm(got.double() - ref) / torch.linalg.vector_norm(ref))
    calls = calls_for(conv_flops(case))
    row["us"] = guarded(log, "conv2d device time", lambda: torch_graph_us(ours, calls, reps))
    row["peer_us"] = guarded(log, "cuDNN device time", lambda: torch_graph_us(peer, calls, reps))
    sync = torch.cuda.synchronize
    row["call_us"] = guarded(log, "conv2d call", lambda: call_time_us(ours, sync))
    row["peer_call_us"] = guarded(log, "cuDNN call", lambda: call_time_us(peer, sync))
    row["ratio"] = row["peer_us"] / row["us"] if row["us"] and row["peer_us"] else None
    if case.groups == case.x[1] and case.w[0] == case.x[1]:  # depthwise: held to bandwidth
        out_elems = got.numel() if got is not None else 0
        moved = (np.prod(case.x) + np.prod(case.w) + out_elems) * x.element_size()
        row["gbps"] = None if row["us"] is None else gbps(moved, row["us"])
    return {k: row.get(k) for k in ROW_KEYS}


def conv_flops(case: ConvCase) -> float:
    """Multiply-adds times two of a convolution row (its output's size times each output's
    taps and channels)."""
    g = conv_geometry(case.x, case.w, stride=case.stride, padding=case.padding,
                      dilation=case.dilation, groups=case.groups)
    return 2.0 * g.n * g.k * g.p * g.q * (g.c // g.groups) * g.r * g.s


CPU_ROUNDS = 3
"""Rounds of the CPU rows' timing, ours then the peer's in each: a shared machine's slow
spells (and the peer's OpenMP threads, which spin on the cores after its calls) fall on
both sides rather than on whichever ran then."""


def best_wall_pair_us(ours, peer, reps: int, rounds: int = CPU_ROUNDS) -> tuple[float, float]:
    """The fastest call of ``ours`` and of ``peer`` (microseconds) over ``rounds`` rounds
    of ``reps`` calls each, the two alternating round by round."""
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for side, fn in enumerate((ours, peer)):
            best[side] = min(best[side], best_wall_us(fn, reps))
    return best[0], best[1]


def best_wall_us(fn, reps: int) -> float:
    """The fastest of ``reps`` calls of ``fn`` after one warm call (microseconds)."""
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e6


def cpu_name() -> str:
    """The CPU as the JSON records it: its architecture and core count."""
    return f"CPU {platform.machine()}, {os.cpu_count()} cores"


def copy_gbps(reps: int) -> float:
    """Device-to-device copy bandwidth (read + write bytes over device time)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    src = cupy.ones(COPY_BYTES // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    stream = cupy.cuda.Stream(non_blocking=True)
    us = device_time_us(lambda: dst.__setitem__(Ellipsis, src), stream, 5, reps)
    return gbps(2 * COPY_BYTES, us)


def class_summary(rows) -> dict:
    """class -> {"n", "geomean", "worst", "min_gbps"} of its rows' ratios."""
    out = {}
    for cls in dict.fromkeys(r["class"] for r in rows):
        mine = [r for r in rows if r["class"] == cls]
        ratios = [r["ratio"] for r in mine if r["ratio"]]
        bw = [r["gbps"] for r in mine if r.get("gbps")]
        out[cls] = {"n": len(mine), "geomean": geomean(ratios),
                    "worst": min(ratios) if ratios else None,
                    "min_gbps": min(bw) if bw else None}
    return out


def _fmt(x, digits=1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def render_markdown(doc) -> str:
    lines = [f"# Shape classes on {doc['device']} ({doc['date']}, commit {doc['commit']})", "",
             f"Copy bandwidth: {_fmt(doc['copy_gbps'], 0)} GB/s. Ratio: peer time over ours "
             "(above 1: faster). einsum rows: device time (CUDA-graph replay, both sides); "
             "gemm rows: wall time per call; conv rows: device time (CUDA-graph replay, both "
             "sides, cuDNN in benchmark mode); conv-cpu rows: each side's best wall time over "
             f"{CPU_ROUNDS} rounds that alternate ours and the peer's.", "",
             "| class | rows | geomean | worst | min GB/s |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for cls, s in class_summary(doc["rows"]).items():
        lines.append(f"| {cls} | {s['n']} | {_fmt(s['geomean'], 2)} | {_fmt(s['worst'], 2)} "
                     f"| {_fmt(s['min_gbps'], 0)} |")
    lines += ["", "| class | expr | shapes | dtype | ours us | peer | peer us | ratio | GB/s "
              "| rel err | source |", "| --- | --- | --- | --- | ---: | --- | ---: | ---: | ---: "
              "| ---: | --- |"]
    for r in doc["rows"]:
        shapes = " x ".join("x".join(map(str, s)) for s in r["shapes"])
        err = "-" if r["rel_err"] is None else f"{r['rel_err']:.1e}"
        lines.append(f"| {r['class']} | `{r['expr']}` | {shapes} | {r['dtype']} | "
                     f"{_fmt(r['us'])} | {r['peer']} | {_fmt(r['peer_us'])} | "
                     f"{_fmt(r['ratio'], 2)} | {_fmt(r['gbps'], 0)} | {err} | {r['source']} |")
    return "\n".join(lines) + "\n"


def write_all(out, name, doc) -> None:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(doc, indent=1))
    (out / f"{name}.md").write_text(render_markdown(doc))


def default_name(device: str) -> str:
    """``shapes-h100`` / ``shapes-h200`` from the device's name; ``shapes-gpu`` otherwise."""
    low = device.lower()
    for part in ("h100", "h200"):
        if part in low:
            return f"shapes-{part}"
    return "shapes-gpu"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m skcontract bench shapes",
                                description=__doc__.splitlines()[0])
    p.add_argument("--out", default="docs/benchmarks",
                   help="folder the JSON and Markdown are written to (default: docs/benchmarks)")
    p.add_argument("--name", default=None,
                   help="the files' base name (default: shapes-<device>, e.g. shapes-h100)")
    p.add_argument("--reps", type=int, default=DEFAULT_REPS,
                   help="timed repetitions of each row, the median kept (default: "
                        f"{DEFAULT_REPS})")
    p.add_argument("--cpu", action="store_true",
                   help="time the CPU convolution classes (conv-cpu-*) against torch's CPU "
                        "convolution instead (no GPU needed; default name shapes-cpu)")
    p.add_argument("--merge", default=None,
                   help="an earlier run's JSON whose rows this run keeps where it does not "
                        "measure them again (each row keeps the commit it was measured at)")
    p.add_argument("--classes", default=None,
                   help="comma-separated classes to time (default: all: "
                        f"{','.join(dict.fromkeys(c.cls for c in GPU_CASES))})")
    args = p.parse_args(argv)
    table = CONV_CPU_CASES if args.cpu else GPU_CASES
    cases = [c for c in table if args.classes is None or c.cls in args.classes.split(",")]
    if not cases:
        p.error(f"no case of the classes {args.classes!r}")

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    device = cpu_name() if args.cpu else device_name()
    name = args.name or ("shapes-cpu" if args.cpu else default_name(device))
    doc = {"date": _dt.date.today().isoformat(), "commit": run_commit(), "device": device,
           "copy_gbps": None if args.cpu else copy_gbps(args.reps), "rows": []}
    earlier = json.loads(Path(args.merge).read_text()) if args.merge else None
    for i, case in enumerate(cases):
        row = measure_row(case, args.reps, log)
        row["commit"] = doc["commit"]
        doc["rows"].append(row)
        log(f"[{i + 1}/{len(cases)}] {case.cls} {row['expr']} {row['dtype']}: ours "
            f"{_fmt(row['us'])}"
            f" us, {row['peer']} {_fmt(row['peer_us'])} us, x{_fmt(row['ratio'], 2)}")
        write_all(args.out, name, merged(earlier, doc) if earlier else doc)  # partial
    if earlier:                                               # results survive a timeout
        doc = merged(earlier, doc)
    print(render_markdown(doc))
    return 0


def measure_row(case, reps: int, log) -> dict:
    """One row of any table: a product, a GPU convolution or a CPU convolution."""
    if isinstance(case, Case):
        return measure(case, reps, log)
    if case.cls.startswith("conv-cpu-"):
        return measure_conv_cpu(case, reps, log)
    import torch  # the benchmark's peer; not a dependency of the library

    torch.backends.cudnn.benchmark = True  # cuDNN's best algorithm for each shape
    torch.backends.cudnn.allow_tf32 = False  # float32 rows exact on both sides
    return measure_conv_gpu(case, reps, log)


def row_key(row) -> tuple:
    """What names a row across runs: class, expression, shapes and dtype."""
    return (row["class"], row["expr"], json.dumps(row["shapes"]), row["dtype"])


def merged(earlier: dict, doc: dict) -> dict:
    """``doc`` with ``earlier``'s rows it did not measure, in ``earlier``'s order (new
    rows after); the rows carry the commit each was measured at, the document this run's
    device, date and the commits of its rows."""
    new = {row_key(r): r for r in doc["rows"]}
    rows = [new.pop(row_key(r), dict(r, commit=r.get("commit", earlier.get("commit"))))
            for r in earlier["rows"]]
    rows += list(new.values())
    commits = sorted({r["commit"] for r in rows if r.get("commit")})
    return dict(doc, rows=rows, commit=", ".join(commits))


if __name__ == "__main__":
    sys.exit(main())
