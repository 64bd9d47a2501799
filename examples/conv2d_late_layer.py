"""A late convolution layer: how skcontract schedules its implicit GEMM, and the result.

    python examples/conv2d_late_layer.py            # prints the plans, writes conv.png

A batch-1 3x3 convolution over 7x7 pixels and 512 channels is a 49 x 512 x 4608 GEMM: four
128x128 output tiles, so a data-parallel kernel keeps 4 of 132 SMs busy. Stream-K splits its
long K over the whole GPU. The layer runs on the GPU when CuPy sees one (channels-last
float16, the fast path), and on the CPU otherwise.
"""
import numpy as np

import skcontract
from skcontract.kernels.conv import resolve_conv
from skcontract.ops.conv2d import conv_geometry
from skcontract.schedule import DeviceInfo
from skcontract.schedule.draw import draw_schedule

N, C, H, W, K, R, S = 1, 512, 7, 7, 512, 3, 3

geometry = conv_geometry((N, C, H, W), (K, C, R, S), padding=1)
problem = geometry.problem("float16")
print(f"implicit GEMM: M={problem.m} N={problem.n} K={problem.k} (batch {problem.batch})")
h200 = DeviceInfo.h200()
for mode in ("data_parallel", "auto"):
    r = resolve_conv(geometry, "float16", h200, mode=mode)
    print(f"{mode:>13}: {r.base.FAMILY} {r.schedule.summary()}")
draw_schedule(resolve_conv(geometry, "float16", h200).schedule, "conv.png", max_ctas=24)
print("schedule picture written to conv.png")

rng = np.random.default_rng(0)
x = rng.standard_normal((N, C, H, W)).astype(np.float32)
w = (rng.standard_normal((K, C, R, S)) / np.sqrt(C * R * S)).astype(np.float32)
try:
    import cupy
    on_gpu = cupy.cuda.runtime.getDeviceCount() > 0
except Exception:  # noqa: BLE001 - no CuPy or no GPU: the CPU path
    on_gpu = False
if on_gpu:
    # channels-last float16 on the GPU: the input and filters are read in place
    xd = cupy.ascontiguousarray(cupy.asarray(x, cupy.float16).transpose(0, 2, 3, 1))
    wd = cupy.ascontiguousarray(cupy.asarray(w, cupy.float16).transpose(0, 2, 3, 1))
    out = cupy.asnumpy(skcontract.conv2d(xd.transpose(0, 3, 1, 2), wd.transpose(0, 3, 1, 2),
                                         padding=1)).astype(np.float64)
    where = "GPU, float16"
else:
    out = skcontract.conv2d(x, w, padding=1).astype(np.float64)
    where = "CPU, float32"
# the centre pixel, by its definition: a sum over channels and the 3x3 neighbourhood
centre = np.einsum("crs,kcrs->k", x[0, :, 2:5, 2:5].astype(np.float64), w.astype(np.float64))
print(f"output {out.shape} ({where}), centre pixel max error vs float64: "
      f"{np.abs(out[0, :, 3, 3] - centre).max():.1e}")
