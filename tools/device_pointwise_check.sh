#!/usr/bin/env bash
# The device check of branch conv-1x1-gemm in one call: the conv2d GPU tests (pointwise
# convolutions on the GEMM kernels), the same with the PENDING fp32 256 x 64 and 64 x 256
# entries offered, then the corpus' 64-output-channel layers timed against cuDNN: auto, and
# fp32 NCHW with the 256 x 64 tile forced (64 x 256 on an NCHW pointwise product, which
# runs transposed).
# Usage (on the device, repo root): OUT=$OUT bash tools/device_pointwise_check.sh
set -u
OUT=${OUT:-$PWD/device_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8")
timeout 130 python3 -m tools.warm_kernels --warm all --jobs 16 > "$OUT/warm.txt" 2>&1
echo "warm rc=$? $(grep -c '^ok' "$OUT/warm.txt") ok"
timeout 110 python3 -m pytest -q $XDIST -p no:cacheprovider tests/gpu/test_conv2d_gpu.py > "$OUT/conv-tests.log" 2>&1
echo "conv tests rc=$?"; tail -3 "$OUT/conv-tests.log"
SKCONTRACT_OFFER_PENDING=1 timeout 110 python3 -m pytest -q $XDIST -p no:cacheprovider tests/gpu/test_conv2d_gpu.py tests/gpu/test_gemm.py -k "float32 or mode or fixup" > "$OUT/pending-tests.log" 2>&1
echo "pending tests rc=$?"; tail -3 "$OUT/pending-tests.log"
L=32x64x56x56x64x3x3x1x1,32x256x56x56x64x1x1x1x0,32x3x224x224x64x7x7x2x3
timeout 90 python3 -m tools.time_conv --layers $L --dtypes float16 --variants auto --reps 7 2>&1 | grep -v -i warn
timeout 140 python3 -m tools.time_conv --layers $L --dtypes float32 --nchw --variants auto,data_parallel:256x64x32 --reps 5 2>&1 | grep -v -i warn
