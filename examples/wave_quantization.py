"""A wave-quantized GEMM: how skcontract plans it, and a picture of the schedule.

    python examples/wave_quantization.py            # prints the plan, writes schedule.png

2176 x 1024 output with 128 x 128 tiles is 136 tiles: one full wave of 132 SMs and a second
wave of 4 tiles that leaves 128 SMs idle. Stream-K gives every CTA an equal share instead.
Runs on the GPU when CuPy and a GPU are present, else on the CPU.
"""
import numpy as np

import skcontract
from skcontract.demo import gpu_available

M, N, K = 2176, 1024, 4096

plan = skcontract.explain("mk,kn->mn", (M, K), (K, N), shapes=True, dtype="float16",
                          draw="schedule.png")
print(plan)
print("schedule picture written to schedule.png")

rng = np.random.default_rng(0)
a = rng.standard_normal((M, K)).astype(np.float16)
b = rng.standard_normal((K, N)).astype(np.float16)
if gpu_available():
    import cupy
    c = cupy.asnumpy(skcontract.einsum("mk,kn->mn", cupy.asarray(a), cupy.asarray(b)))
else:
    c = skcontract.einsum("mk,kn->mn", a, b)
ref = a.astype(np.float64) @ b.astype(np.float64)
print(f"relative error vs float64: {np.linalg.norm(c - ref) / np.linalg.norm(ref):.1e}")
