#!/usr/bin/env bash
# The device check of the cluster pairs (WgmmaPair) in one call: compile their kernels, run
# their sanitizer cases once without the sanitizer (a hang there is a deadlock), time them
# against the single-CTA entries and cuBLAS, run their GPU tests (the log's last line names
# the test a stop happened in), then compute-sanitizer on their cases and the fp32 narrow
# tiles'.
# Usage (on the device, repo root): OUT=$OUT bash tools/device_pair_check.sh
set -u
OUT=${OUT:-$PWD/device_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
CASES=1056x1056x4096,520x136x1000,136x520x1000
timeout 120 python3 -m tools.warm_kernels --families WgmmaPair --dtypes float16 --jobs 16 > "$OUT/warm.txt" 2>&1
echo "warm rc=$? $(tail -1 "$OUT/warm.txt")"; grep FAIL "$OUT/warm.txt" | head -3
timeout 40 python3 -m tools.sanitize_cases $CASES 2>&1 | tail -6; echo "smoke rc=${PIPESTATUS[0]}"
S=1056x1056x8192,1536x1536x8192,2000x3000x5000,4096x4096x4096,1024x1024x1024
fmt() { python3 -c "
import json,sys
for l in sys.stdin:
  try: r=json.loads(l)
  except Exception: print(l.strip()[:200]); continue
  print(r['shape'], r['mode'], r.get('tile'), round(r.get('us',-1),1), round(r.get('torch_us',-1),1), r.get('error','')[:80])"; }
timeout 50 python3 -m tools.time_gemm --shapes $S --dtypes float16 --peer --reps 7 2>&1 | fmt
timeout 100 python3 -m tools.time_gemm --shapes $S --dtypes float16 --reps 7 --mode auto,stream_k,data_parallel --tile 256x128x64,256x256x64 2>&1 | fmt
timeout 100 python3 -m pytest -v -x -p no:cacheprovider tests/gpu/test_gemm.py -k "cluster_pairs and not bfloat16" > "$OUT/pair-tests.log" 2>&1
echo "pair tests rc=$?"; grep -E "PASS|FAIL|Error" "$OUT/pair-tests.log" | tail -5; tail -2 "$OUT/pair-tests.log"
for tool in memcheck racecheck; do
  timeout 50 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 python3 -m tools.sanitize_cases $CASES > "$OUT/$tool.log" 2>&1
  echo "$tool rc=$?"; grep -E "ok|FAIL|SUMMARY" "$OUT/$tool.log" | tail -6
done
