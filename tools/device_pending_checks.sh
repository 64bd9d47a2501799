#!/usr/bin/env bash
# The checks the thirteenth session ran on the device at bca09fb (docs/benchmarks/log.md,
# "The device, again"; run again to compare after a change), most wanted first, each only
# while the call has time left (BUDGET_S, default 540):
#   1. the networks' hyper plans (the default optimiser's plan a candidate, the launches'
#      copies in the slicer) and cotengra's, run on the GPU (issue 52; bench networks-run
#      --planners; PLANS: the plans' JSON, default docs/benchmarks/networks-plans-h100.json);
#   2. pointwise layers whose output channels miss the 128-wide tile (MobileNetV2's 144 and
#      24, EfficientNet's 40), auto against forced tiles (issue 51; cuBLAS's nvjet kernel,
#      which cuDNN runs for the 144-channel layer, has a 144 x 256 tile);
#   3. Nsight Compute on our kernels alone for the 144-channel layer (DRAM bytes, time, SM
#      throughput; the last run's filter let cuDNN's fill the report).
# Usage (on the device, repo root, carry .whl .commit): OUT=$OUT bash tools/device_pending_checks.sh
set -u
. tools/device_common.sh
POINTWISE=64x24x56x56x144x1x1x1x0,64x144x56x56x24x1x1x1x0,64x240x28x28x40x1x1x1x0
{
nvidia-smi --query-gpu=name,driver_version --format=csv
echo "== networks, hyper and cotengra plans (${PLANS:-docs/benchmarks/networks-plans-h100.json})"
timeout $(( $(left) - 150 )) python3 -m skcontract bench networks-run \
  --plans "${PLANS:-docs/benchmarks/networks-plans-h100.json}" --planners hyper,cotengra \
  --out "$OUT" --name networks-h100 2>&1 | grep -v -i warn | tail -40
echo "== $(left) s left"
if [ "$(left)" -gt 60 ]; then
  echo "== pointwise layers, auto and forced tiles"
  timeout 100 python3 -m tools.time_conv --layers "$POINTWISE" --dtypes float16 \
    --variants auto,data_parallel:128x128x64,data_parallel:128x256x64,data_parallel:64x256x64,stream_k:128x256x64 \
    --reps 15 2>&1 | grep -v -i warn | cut -c1-400
fi
echo "== $(left) s left"
if [ "$(left)" -gt 40 ]; then
  echo "== ncu, our kernels on the 144-channel layer"
  timeout 60 ncu --metrics dram__bytes_write.sum,dram__bytes_read.sum,gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_op_write.sum \
    -k regex:'sk_wgmma|skc' -c 4 python3 -m tools.time_conv --layers 64x24x56x56x144x1x1x1x0 --reps 1 \
    2>&1 | grep -v -i warn | grep -v "^==PROF==" | tail -40
fi
echo "== $(left) s left"
} > "$OUT/log.txt" 2>&1
tail -c 8000 "$OUT/log.txt"
