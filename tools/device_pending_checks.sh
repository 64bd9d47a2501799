#!/usr/bin/env bash
# The checks the eleventh session left for the device (docs/benchmarks/log.md, "eleventh
# session"), most wanted first, each only while the call has time left (BUDGET_S, default 540):
#   1. the networks planned for the H100 under the GPU peak model, run on CuPy: measured
#      peaks against the predictions (issue 52);
#   2. the pointwise convolutions with TMA stores, then the threads' stores (issue 51);
#   3. long K (768 x 768 x 16384 fp16) under 6, 12 and 36 Stream-K groups (issue 50);
#   4. Nsight Compute's L2 compression counters on the 128-channel pointwise layer;
#   5. on an H100, the rows-off-16B shape class (the vector line copy).
# Usage (on the device, repo root, carry .whl .kc .commit): OUT=$OUT bash tools/device_pending_checks.sh
set -u
OUT=${OUT:-$PWD/device_out}; mkdir -p "$OUT"
T0=$(date +%s); BUDGET_S=${BUDGET_S:-540}
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/*.whl > /dev/null 2>&1
export SKCONTRACT_COMMIT=$(cat .commit) PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
if ls .kc/kcache.tgz.* > /dev/null 2>&1; then
  cat .kc/kcache.tgz.* | tar xzf -; export SKCONTRACT_CACHE_DIR=$PWD/.kcache
fi
LAY=64x24x56x56x128x1x1x1x0,64x24x56x56x144x1x1x1x0,64x240x28x28x40x1x1x1x0,32x512x7x7x2048x1x1x1x0
# a tools module run with one module constant patched: MODULES NAME VALUE TOOL ARGS...
PATCHED='import importlib, runpy, sys
modules, name, value, tool, *args = sys.argv[1:]
for m in modules.split(","):
    setattr(importlib.import_module(m), name, int(eval(value)))
sys.argv = [tool, *args]
runpy.run_module(tool, run_name="__main__")'
{
nvidia-smi --query-gpu=name,driver_version --format=csv
NO_WARM=1 NETWORKS_S=$(( $(left) / 2 )) NETWORKS_ARGS="--networks circuit,circuit-open,peps,lattice" \
  NETWORKS_PLANS=docs/benchmarks/networks-plans-h100.json OUT=$OUT/networks bash tools/device_run.sh networks
echo "== $(left) s left"
if [ "$(left)" -gt 120 ]; then
  echo "== time_conv, TMA stores"
  timeout 50 python3 -m tools.time_conv --layers $LAY --variants auto --reps 9 2>&1 | grep -v -i warn
  echo "== time_conv, the threads' stores"
  timeout 50 python3 -c "$PATCHED" skcontract.kernels.tma STORE_MIN_OUTPUTS "1 << 62" tools.time_conv \
    --layers $LAY --variants auto --reps 9 2>&1 | grep -v -i warn
fi
if [ "$(left)" -gt 60 ]; then
  echo "== long K, Stream-K groups"
  timeout 50 python3 -c "$PATCHED" skcontract.schedule.decompose,skcontract.schedule.heuristics MAX_STREAM_K_GROUPS 64 \
    tools.time_gemm --shapes 768x768x16384 --dtypes float16 --layouts cr --tile 128x128x64 \
    --mode stream_k --walk auto:auto:auto,6:auto:auto,12:auto:auto,36:auto:auto --peer --reps 15 \
    2>&1 | cut -c1-400 | grep -v -i warn
fi
if [ "$(left)" -gt 100 ]; then
  echo "== ncu, L2 compression"
  M=$(ncu --query-metrics 2>/dev/null | awk '{print $1}' | grep -i -E "^lts__.*gcomp" | head -6 | sed 's/$/.sum/' | paste -sd,)
  echo "metrics: $M"
  timeout 90 ncu --metrics lts__t_sectors_op_write.sum,dram__bytes_write.sum,gpu__time_duration.sum${M:+,$M} \
    -k regex:'sk_wgmma|nvjet|cudnn|sm90' -c 6 python3 -m tools.time_conv \
    --layers 64x24x56x56x128x1x1x1x0 --reps 1 2>&1 | grep -v -i warn | tail -60
fi
if [ "$(left)" -gt 120 ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H100; then
  NO_WARM=1 SHAPES_CLASSES=rows-off-16B BENCH_S=$(( $(left) - 20 )) OUT=$OUT/shapes bash tools/device_run.sh shapes
fi
echo "== $(left) s left"
} > "$OUT/log.txt" 2>&1
tar czf "$OUT/results.tgz" -C "$OUT" --exclude results.tgz --exclude log.txt . 2>/dev/null
tail -c 8000 "$OUT/log.txt"
