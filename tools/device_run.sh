#!/usr/bin/env bash
# One device call: warm the kernel cache, run the GPU tests, compute-sanitizer on each fixup
# protocol, then the GEMM benchmark; everything lands under $OUT (default ./device_out).
# Usage (on the device, repo root): bash tools/device_run.sh [smoke|tests|sanitize|race|bench|einsum|quick|subset|pending|narrow|probes|ktrace|ab|placement]...
#   smoke   : tools.sanitize_cases without the sanitizer
#   savecache: the kernel cache into $OUT (kcache.tgz.*; carried back in .kc/, restored first)
#   new     : the GPU tests of NEW_TESTS (default: the direct kernels' files and einsum's), -rf
#   bundle  : everything under $OUT but the kernel-cache parts into $OUT/results.tgz (the run's
#             transfer brings back a limited number of files: name it last)
#   complex : the complex GPU tests, then the complex benchmark into $OUT
#   race    : racecheck over tools.sanitize_cases in groups (RACE_GROUPS, default the 16-bit
#             GEMM cases; e.g. "float32,float64 tf32,3xtf32,int8 dot conv"), each group
#             RACE_S (150) s: the whole list takes longer than one device call
#   shapes  : the shape-class benchmark (SHAPES_CLASSES, default all) into $OUT, merged with the
#             committed docs/benchmarks/shapes-<device>.json where there is one
#   einsum  : the einsum benchmark (skcontract.bench.einsum) into $OUT
#   networks: bench networks-run (NETWORKS_PLANS, default the committed networks-cpu.json;
#             NETWORKS_ARGS adds its options) into $OUT
#   timegemm: tools.time_gemm $TIMEGEMM_ARGS into $OUT/time-gemm.jsonl
#   subset  : bench fp32 + fp64 only, merged into the committed docs/benchmarks/gemm-h200.json
#   half    : bench bf16 + fp16 only, merged into $OUT/gemm-h200.json (after subset) or else
#             into the committed docs/benchmarks/gemm-h200.json
#   conv    : the conv2d GPU tests alone (verbose), into conv.log
#   convbench: the conv2d benchmark (skcontract.bench.conv2d) into $OUT
#   pending : the GPU tests that wait longest (co-residency, shared sums, auto), one process,
#             verbose, with catalogue.PENDING offered (SKCONTRACT_OFFER_PENDING=1): the last
#             line of pending.log names the test a stop happened in
#   narrow  : Nsight Compute on the narrow Wgmma tiles (64x64, 128x64) against cuBLAS's 64x64 on
#             products of few tiles: shared-memory and L2 throughput; stall samples by SASS
#             instruction (tools.ncu_stalls) of our 64x64 and cuBLAS's
#   ktrace  : tools.trace_kernel --ktiles on the narrow tiles' products of one tile an SM (each
#             k-tile's loads from issue to landed, KTRACE_CASES), cuBLAS's time beside
#   probes  : tools.time_gemm --probe none,loads,mma on the narrow tiles, every layout (the
#             mainloop's halves timed apart: PROBE_SHAPES, PROBE_TILES, PROBE_LAYOUTS)
#   placement: tools.sm_placement: the SM of each CTA of one-CTA-an-SM launches (132 and 81
#             CTAs, three times each) and the GPCs that clusters of 2 - 16 imply
#   ab      : tools.time_gemm alternately on the tree in .old/ (an earlier commit's skcontract,
#             carried) and this one, AB_SHAPES x AB_DTYPES, AB_ROUNDS (2) times each; AB_ARGS
#             adds time_gemm's options (e.g. "--tile 64x64x64 --mode data_parallel")
set -u
OUT=${OUT:-$PWD/device_out}
mkdir -p "$OUT"
ROOT=$PWD
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
# the device's copy of the checkout may carry stale git metadata: write the commit to .commit
# (git-ignored: name it in the run's carry) before the run, or pass SKCONTRACT_COMMIT
export SKCONTRACT_COMMIT=${SKCONTRACT_COMMIT:-$(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}
STEPS=${*:-tests sanitize bench}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'torch', torch.__version__)" | tee -a "$OUT/gpu.txt"
# the kernel cache a previous call saved (step savecache) travels in .kc/ (git-ignored: name
# it in the run's carry): restored here, compiles drop from minutes to seconds
if [ -z "${SKCONTRACT_CACHE_DIR:-}" ] && ls .kc/kcache.tgz.* > /dev/null 2>&1; then
  export SKCONTRACT_CACHE_DIR=$PWD/.kcache
  cat .kc/kcache.tgz.* | tar xzf - && echo "kernel cache restored: $(ls .kcache | wc -l) files"
  NO_WARM=${NO_WARM:-1}
fi
t0=$(date +%s)
if [ -z "${NO_WARM:-}" ]; then
  timeout ${WARM_S:-240} python3 -m tools.warm_kernels --warm default-tiles --jobs 16 > "$OUT/warm.log" 2>&1
  echo "warm rc=$? $(tail -1 "$OUT/warm.log") ($(( $(date +%s) - t0 ))s)"
fi
XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n ${JOBS:-8}")
for step in $STEPS; do
  t0=$(date +%s)
  case $step in
    smoke)
      timeout 120 python3 -m tools.sanitize_cases > "$OUT/smoke.log" 2>&1
      echo "smoke rc=$?"; cat "$OUT/smoke.log" | tail -15;;
    pending)
      SKCONTRACT_OFFER_PENDING=1 timeout ${TESTS_S:-300} python3 -m pytest -v -p no:cacheprovider \
        tests/gpu/test_gemm.py tests/gpu/test_engine.py -k "coresidency or shared_sum or auto or modes" \
        > "$OUT/pending.log" 2>&1
      echo "pending rc=$? ($(( $(date +%s) - t0 ))s)"; tail -3 "$OUT/pending.log";;
    new)
      files=${NEW_TESTS:-tests/gpu/test_outer.py tests/gpu/test_small_batched.py tests/gpu/test_depthwise.py tests/gpu/test_einsum_gpu.py}
      timeout ${NEW_S:-150} python3 -m pytest -q $XDIST -rf -p no:cacheprovider $files > "$OUT/new.log" 2>&1
      echo "new tests rc=$? ($(( $(date +%s) - t0 ))s)"; grep -E "^FAILED|passed|failed" "$OUT/new.log" | tail -15;;
    tests)
      # SIGINT at the limit: pytest still prints the failures' summary (-rfE) and durations
      timeout -s INT -k 30 ${TESTS_S:-300} python3 -m pytest -q -rfE $XDIST --maxfail=40 ${TESTS:-tests/gpu} -p no:cacheprovider --durations=15 > "$OUT/pytest.log" 2>&1
      echo "pytest rc=$? ($(( $(date +%s) - t0 ))s)"; grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.log" | tail -45;;
    sanitize)
      # --report-api-errors no: cuda.bindings probes driver entry points (cuGetProcAddress)
      # that this driver lacks on first use, which the sanitizer would count as errors;
      # a failing API call of ours raises in Python and fails the case anyway
      for tool in ${SAN_TOOLS:-memcheck racecheck}; do
        timeout ${SAN_S:-90} compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 python3 -m tools.sanitize_cases > "$OUT/sanitize-$tool.log" 2>&1
        echo "sanitizer $tool rc=$? ($(( $(date +%s) - t0 ))s)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAIL" "$OUT/sanitize-$tool.log" | tail -3
      done;;
    race)
      for group in ${RACE_GROUPS:-float16}; do
        log="$OUT/racecheck-$(echo "$group" | tr ',' '-').log"
        timeout ${RACE_S:-150} compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 python3 -m tools.sanitize_cases "$group" > "$log" 2>&1
        echo "racecheck $group rc=$? ($(( $(date +%s) - t0 ))s), $(grep -c '^ok' "$log") cases ok"; grep -E "RACECHECK SUMMARY|FAIL" "$log" | tail -3
      done;;
    bench)
      timeout ${BENCH_S:-500} python3 -m skcontract.bench.gemm --out "$OUT" > "$OUT/bench.log" 2>&1
      echo "bench rc=$? ($(( $(date +%s) - t0 ))s)"; tail -25 "$OUT/bench.log";;
    subset)
      timeout ${BENCH_S:-300} python3 -m skcontract.bench.gemm --dtypes float32,float64 --merge docs/benchmarks/gemm-h200.json --out "$OUT" > "$OUT/bench.log" 2>&1
      echo "bench rc=$? ($(( $(date +%s) - t0 ))s)"; tail -12 "$OUT/bench.log";;
    half)
      merge=$OUT/gemm-h200.json; [ -f "$merge" ] || merge=docs/benchmarks/gemm-h200.json
      timeout ${BENCH_S:-500} python3 -m skcontract.bench.gemm --dtypes bfloat16,float16 --merge "$merge" --out "$OUT" > "$OUT/bench-half.log" 2>&1
      echo "bench rc=$? ($(( $(date +%s) - t0 ))s)"; tail -25 "$OUT/bench-half.log";;
    ab)
      for i in $(seq ${AB_ROUNDS:-2}); do
        for tree in old new; do
          # python -m puts the working directory first on sys.path: the old tree's run
          # starts in .old so that its skcontract is the one imported (tools come from the
          # checkout through PYTHONPATH; each row's "tree" says which skcontract ran)
          dir=$PWD; [ $tree = old ] && dir=$PWD/.old
          (cd "$dir" && PYTHONPATH=$dir:$ROOT timeout 120 python3 -m tools.time_gemm --tag $tree --shapes "${AB_SHAPES}" --dtypes "${AB_DTYPES:-float32,float64}" ${AB_ARGS:-}) >> "$OUT/ab.jsonl" 2>> "$OUT/ab.err"
        done
      done
      echo "ab rc=$? ($(( $(date +%s) - t0 ))s)"; cat "$OUT/ab.jsonl" | python3 -c "
import json, sys, collections
d = collections.defaultdict(list)
for l in sys.stdin:
    r = json.loads(l)
    if 'us' in r: d[(r['shape'], r['dtype'], r['tag'])].append(r['us'])
for (sh, dt, tag), v in sorted(d.items()): print(sh, dt, tag, ' '.join(f'{x:.1f}' for x in v))";;
    narrow)
      cases=fp16-512x1024x4096:data_parallel:64x64x64,fp16-512x1024x4096:data_parallel:128x64x64x1x1
      cases=$cases,fp16-512x1024x4096:cublas,fp16-8x256x256x4096:data_parallel:64x64x64
      cases=$cases,fp16-8x256x256x4096:cublas
      timeout ${NCU_S:-300} ncu --clock-control none --profile-from-start off \
        --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SourceCounters \
        --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed \
        python3 -m tools.ncu_cases --cases "$cases" > "$OUT/ncu-narrow.txt" 2>&1
      echo "ncu narrow rc=$? ($(( $(date +%s) - t0 ))s)"
      grep -E "sk_wgmma|nvjet|Duration|Shared|shared|Throughput" "$OUT/ncu-narrow.txt" | head -60
      # stall samples by SASS instruction (ncu's source page), ours and cuBLAS's
      for c in fp16-512x1024x4096:data_parallel:64x64x64 fp16-512x1024x4096:cublas; do
        f="$OUT/ncu-source-$(echo "$c" | tr ':' '_').csv"
        timeout 150 ncu --clock-control none --profile-from-start off --section WarpStateStats \
          --section SourceCounters --page source --print-source sass --csv \
          python3 -m tools.ncu_cases --cases "$c" > "$f" 2>&1
        python3 -m tools.ncu_stalls "$f" --top 12
      done;;
    probes)
      # the Wgmma mainloop in halves (tools.time_gemm --probe): full, loads alone, wgmmas
      # alone, on the narrow tiles' products of one tile an SM, each layout, cuBLAS beside
      timeout ${PROBES_S:-240} python3 -m tools.time_gemm --peer --dtypes float16 \
        --shapes ${PROBE_SHAPES:-512x1024x8192,8x256x256x4096} --mode data_parallel \
        --tile ${PROBE_TILES:-64x64x64,128x64x64x1x2} --layouts ${PROBE_LAYOUTS:-rr,rc,cr,cc} \
        --probe none,loads,mma > "$OUT/probes.jsonl" 2> "$OUT/probes.err"
      echo "probes rc=$? ($(( $(date +%s) - t0 ))s)"
      python3 -c "
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(r['shape'], r.get('layout'), r.get('tile'), r.get('probe'), round(r.get('us', -1), 2),
          'cublas', round(r.get('torch_us', -1), 2), r.get('error', '')[:60])" "$OUT/probes.jsonl";;
    ktrace)
      cases=fp16-512x1024x8192:data_parallel:64x64x64,fp16-8x256x256x4096:data_parallel:64x64x64
      cases=$cases,fp16-1024x1024x8192:data_parallel:128x64x64x1
      cases=$cases,fp16-2048x2048x8192:data_parallel:128x256x64
      timeout ${KTRACE_S:-150} python3 -m tools.trace_kernel --ktiles \
        --gemm "${KTRACE_CASES:-$cases}" > "$OUT/ktrace.txt" 2>&1
      echo "ktrace rc=$? ($(( $(date +%s) - t0 ))s)"; cat "$OUT/ktrace.txt" | tail -60;;
    conv)
      timeout ${CONV_S:-200} python3 -m pytest -q $XDIST -p no:cacheprovider tests/gpu/test_conv2d_gpu.py > "$OUT/conv.log" 2>&1
      echo "conv tests rc=$? ($(( $(date +%s) - t0 ))s)"; tail -4 "$OUT/conv.log";;
    convbench)
      timeout ${BENCH_S:-300} python3 -m skcontract.bench.conv2d --out "$OUT" > "$OUT/bench-conv2d.log" 2>&1
      echo "bench conv2d rc=$? ($(( $(date +%s) - t0 ))s)"; tail -12 "$OUT/bench-conv2d.log";;
    shapes)
      name=$(python3 -c "from skcontract.bench.shapes import default_name; from skcontract.bench.timing import device_name; print(default_name(device_name()))")
      merge=""; [ -f "docs/benchmarks/$name.json" ] && merge="--merge docs/benchmarks/$name.json"
      timeout ${BENCH_S:-400} python3 -m skcontract bench shapes --out "$OUT" $merge \
        ${SHAPES_CLASSES:+--classes $SHAPES_CLASSES} > "$OUT/bench-shapes.md" 2> "$OUT/bench-shapes.log"
      echo "bench shapes rc=$? ($(( $(date +%s) - t0 ))s)"; tail -40 "$OUT/bench-shapes.log";;
    networks)
      timeout ${NETWORKS_S:-300} python3 -m skcontract bench networks-run --out "$OUT" \
        --plans ${NETWORKS_PLANS:-docs/benchmarks/networks-cpu.json} ${NETWORKS_ARGS:-} \
        > "$OUT/bench-networks.md" 2> "$OUT/bench-networks.log"
      echo "bench networks rc=$? ($(( $(date +%s) - t0 ))s)"; tail -50 "$OUT/bench-networks.log";;
    timegemm)
      timeout ${TIMEGEMM_S:-150} python3 -m tools.time_gemm $TIMEGEMM_ARGS > "$OUT/time-gemm.jsonl" 2> "$OUT/time-gemm.err"
      echo "time_gemm rc=$? ($(( $(date +%s) - t0 ))s)"; cut -c1-400 "$OUT/time-gemm.jsonl" | tail -40;;
    einsum)
      timeout ${BENCH_S:-400} python3 -m skcontract.bench.einsum --out "$OUT" > "$OUT/bench-einsum.log" 2>&1
      echo "bench einsum rc=$? ($(( $(date +%s) - t0 ))s)"; tail -30 "$OUT/bench-einsum.log";;
    placement)
      timeout ${PLACEMENT_S:-120} python3 -m tools.sm_placement > "$OUT/placement.jsonl" 2> "$OUT/placement.err"
      echo "placement rc=$? ($(( $(date +%s) - t0 ))s)"; tail -c 3000 "$OUT/placement.jsonl";;
    savecache)
      # the kernel cache into $OUT in parts under the transfer's 16 MiB a file: copy them to
      # .kc/ here to carry them to the next call
      tar czf /tmp/kcache.tgz -C "$(dirname "${SKCONTRACT_CACHE_DIR:-$HOME/.cache/skcontract}")" \
        "$(basename "${SKCONTRACT_CACHE_DIR:-$HOME/.cache/skcontract}")" && \
        split -b 15M /tmp/kcache.tgz "$OUT/kcache.tgz."
      echo "savecache rc=$? $(ls "$OUT"/kcache.tgz.* | wc -l) parts";;
    bundle)
      (cd "$OUT" && ls | grep -v -e '^kcache\.tgz\.' -e '^results\.tgz$' > /tmp/bundle.list && \
        tar czf results.tgz -T /tmp/bundle.list && xargs rm -f < /tmp/bundle.list)
      echo "bundle rc=$? $(tar tzf "$OUT/results.tgz" | wc -l) files in results.tgz";;
    complex)
      timeout ${COMPLEX_S:-300} python3 -m pytest -q $XDIST -p no:cacheprovider -rf tests/gpu/test_complex.py > "$OUT/complex.log" 2>&1
      echo "complex tests rc=$? ($(( $(date +%s) - t0 ))s)"; tail -15 "$OUT/complex.log"
      timeout ${BENCH_S:-300} python3 -m skcontract.bench.complex --out "$OUT" > "$OUT/bench-complex.log" 2>&1
      echo "bench complex rc=$? ($(( $(date +%s) - t0 ))s)"; tail -20 "$OUT/bench-complex.log";;
    quick)
      timeout 300 python3 -m skcontract.bench.gemm --quick --out "$OUT" > "$OUT/bench.log" 2>&1
      echo "bench rc=$? ($(( $(date +%s) - t0 ))s)"; tail -25 "$OUT/bench.log";;
  esac
done
