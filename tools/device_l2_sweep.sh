#!/usr/bin/env bash
# Device time of one tile at several grids (data-parallel, so each CTA runs whole tiles and
# the grid sets how many SMs read the L2 at once), single-CTA entries against the cluster
# pairs: the data to fit the cost model's L2 term and the pairs' coupling cost
# (docs/benchmarks/log.md, 2026-12-02). One JSON line per (shape, tile, grid) in $OUT.
# Usage (on the device, repo root): OUT=$OUT bash tools/device_l2_sweep.sh
set -u
OUT=${OUT:-$PWD/device_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
S=${SWEEP_SHAPES:-4096x4096x4096,1056x1056x8192,2048x2048x2048}
timeout 240 python3 -m tools.time_gemm --shapes $S --dtypes float16 --reps 5 --peer \
  --mode data_parallel --tile 128x128x64,128x256x64,128x64x64x1 --grid 33,66,99,132 \
  > "$OUT/l2-single.jsonl" 2> "$OUT/l2-single.err"
echo "single rc=$? $(grep -c '"us"' "$OUT/l2-single.jsonl") rows"
timeout 200 python3 -m tools.time_gemm --shapes $S --dtypes float16 --reps 5 \
  --mode data_parallel --tile 256x128x64,256x256x64 --grid 16,33,50,66 \
  > "$OUT/l2-pairs.jsonl" 2> "$OUT/l2-pairs.err"
echo "pairs rc=$? $(grep -c '"us"' "$OUT/l2-pairs.jsonl") rows"
cat "$OUT"/l2-*.jsonl | python3 -c "
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if 'us' in r:
        print(r['shape'], r.get('tile'), r.get('grid'), round(r['us'], 1), round(r.get('torch_us', -1), 1))"
