#!/usr/bin/env bash
# The checks the twelfth and thirteenth sessions left for the device (docs/benchmarks/log.md),
# most wanted first, each only while the call has time left (BUDGET_S, default 540):
#   1. long K: Stream-K groups up to one tile a group on the long-k class's fp16 shapes and
#      one more (issue 50; 36 groups beat the default 6 on 768 x 768 x 16384);
#   2. the networks' hyper plans of the thirteenth session (the default optimiser's plan a
#      candidate) and cotengra's, run on the GPU (issue 52; bench networks-run --planners);
#   3. Nsight Compute on our 144-channel pointwise kernel beside cuDNN's (DRAM bytes, time,
#      SM throughput; the last run's filter missed our kernels' names).
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
# a tools module run with one module constant patched: MODULES NAME VALUE TOOL ARGS...
PATCHED='import importlib, runpy, sys
modules, name, value, tool, *args = sys.argv[1:]
for m in modules.split(","):
    setattr(importlib.import_module(m), name, int(eval(value)))
sys.argv = [tool, *args]
runpy.run_module(tool, run_name="__main__")'
{
nvidia-smi --query-gpu=name,driver_version --format=csv
echo "== long K, Stream-K groups up to one tile a group (cap 64)"
timeout 150 python3 -c "$PATCHED" skcontract.schedule.decompose,skcontract.schedule.heuristics MAX_STREAM_K_GROUPS 64 \
  tools.time_gemm --shapes 768x768x16384,1024x128x32768,512x512x32768 --dtypes float16 --layouts cr \
  --tile 128x128x64 --mode stream_k --walk auto:auto:auto,4:auto:auto,6:auto:auto,8:auto:auto,16:auto:auto,36:auto:auto \
  --peer --reps 15 2>&1 | cut -c1-600 | grep -v -i warn
echo "== $(left) s left"
if [ "$(left)" -gt 200 ]; then
  echo "== networks, hyper and cotengra plans (${PLANS:-docs/benchmarks/networks-plans-h100.json})"
  timeout $(( $(left) - 100 )) python3 -m skcontract bench networks-run \
    --plans "${PLANS:-docs/benchmarks/networks-plans-h100.json}" --planners hyper,cotengra \
    --out "$OUT" --name networks-h100 2>&1 | grep -v -i warn | tail -40
fi
echo "== $(left) s left"
if [ "$(left)" -gt 90 ]; then
  echo "== ncu, our pointwise kernel and cuDNN's"
  timeout 120 ncu --metrics dram__bytes_write.sum,dram__bytes_read.sum,gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_op_write.sum \
    -k regex:'wgmma|nvjet|cudnn|sm90' -c 8 python3 -m tools.time_conv \
    --layers 64x24x56x56x144x1x1x1x0 --reps 1 2>&1 | grep -v -i warn | tail -70
fi
echo "== $(left) s left"
} > "$OUT/log.txt" 2>&1
tar czf "$OUT/results.tgz" -C "$OUT" --exclude results.tgz --exclude log.txt . 2>/dev/null
tail -c 8000 "$OUT/log.txt"
