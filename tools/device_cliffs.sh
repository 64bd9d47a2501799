#!/usr/bin/env bash
# Probes of the GPU classes that stay below their peers (issues 51, 52), in one device call,
# most wanted first, each only while the call has time left (BUDGET_S, default 540):
#   1. pointwise: the 1x1 layer's GEMM (200704 x 128 / 144 x 24, MobileNetV2's expansion)
#      against the same product at K = 64 and a wide one (49152 x 1024 x 64, which stores at
#      copy bandwidth), each with the mainloop's loads alone and its wgmmas alone
#      (tools.time_gemm --probe), then TMA against the threads' stores; then the conv2d
#      pointwise GPU tests and the 24- and 40-channel layers against cuDNN (their padded
#      copies: docs/conv2d.md);
#   2. skcontract.dask on one GPU worker against the in-process run (tools.bench_dask --gpu);
#   3. Nsight Compute's stall samples by SASS instruction (tools.ncu_stalls reads the CSVs
#      written to $OUT) of the depthwise 5x5 and the ResNeXt grouped layers' kernels;
#   x3: 3xTF32 against exact float32 by K (tools.x3_sweep: errors and device time);
#   x3tests: the GPU tests of 3xTF32, einsum, complex, slicing and the warm path;
#   shapes: the shape-class benchmark's SHAPES_CLASSES (default exact-fp32) into $OUT;
#   networks: the float32 networks' hyper and cotengra plans run (bench networks-run; NETWORKS,
#     NETWORK_LIMITS, PLANNERS pick the rows; the whole log in $OUT/networks.log);
#   tests: the GPU tests of what last ran on no GPU: depthwise (the tensor-core kernel, the
#     square kernel on packs of 4 channels), the complex and Dot tests (memory-bound complex
#     products on the Dot kernel), conv2d's depthwise ones, the GPU parity suite's complex
#     cases;
#   sanitize: memcheck and racecheck on the tensor-core and square depthwise kernels'
#     float16 tests with a bias, memcheck over tools.sanitize_cases complex;
#   depthwise: tools.time_depthwise's layers (the conv-depthwise class's and four more) in
#     float16 against cuDNN, as planned and with the square (packs of 4 and 8 channels) and
#     tensor-core kernels forced (DW_VARIANTS, default auto,square,wide,mma;
#     $OUT/depthwise.jsonl);
#   strip8: the square kernel with strips of 8 columns at step 1 and 4 at step 2 (the header
#     edited in this call's copy, restored after), its float16 tests and times
#     ($OUT/depthwise-strip8.jsonl);
#   longk: long-k weight gradients (few output tiles, K of 8192-262144, `tk,tn->kn`: layout
#     cr) by mode, tile and reduction against cuBLAS ($OUT/longk.jsonl);
#   smallcomplex: the small-batched kernel's complex builds (GPU tests, memcheck) and the
#     circuits' hyper plans with small_batched.SINGLE_COMPLEX on ($OUT/smallcomplex/);
#   fold: tall products folded onto the small-batched kernel (GPU tests, memcheck, the
#     tall-narrow and tiny-batched classes with and without the fold, the regular graph
#     with CANDIDATES on; $OUT/fold/);
#   candidates: the networks' plans, hyper and cotengra, with CANDIDATES on
#     ($OUT/networks-candidates.json; NETWORKS, PLANNERS, NETWORKS_S);
#   netprofile: tools.profile_call --network over PROFILE_NETS (name:limit, default
#     circuit:8GiB regular:1GiB): host time of calls of one and two slices, cProfile, then
#     tools.kernel_times --network: each kernel's device time in a slice
#     ($OUT/netprofile-<name>.txt);
#   arrange: the networks' hyper plans (NETWORKS, NETWORK_LIMITS) with the results'
#     label orders arranged for their readers (plan/arrange.py's ARRANGE on) and without,
#     same call ($OUT/arrange-*.json);
#   decode: decode products (DECODE, or DECODE_SHAPES) on auto and on the 64 x 64 streaming
#     tile against cuBLAS ($OUT/decode.jsonl);
#   skinny: decoding-batch GEMMs (M = 4-16, B read once) by mode and tile, with the
#     mainloop's loads alone, against cuBLAS ($OUT/skinny.jsonl);
#   complexbench: `bench complex --memory-bound` into $OUT (COMPLEX_ARGS replaces the flag);
#   conjdot: memcheck over the GPU tests of conjugated operands, then `bench complex
#     --memory-bound` with the Dot kernel reading them conjugated (DOT_READS_CONJUGATED on,
#     $OUT/conjdot/).
# Usage (on the device, repo root, carry .whl .commit):
#   OUT=$OUT [STEPS="x3 x3tests shapes pointwise dask stalls"] bash tools/device_cliffs.sh
# (the tests step's files and -k expression: TEST_FILES, TEST_K)
set -u
. tools/device_common.sh
quiet() { grep -v -i warn | grep -v "^==PROF=="; }
STEPS=${STEPS:-pointwise dask stalls}
# the switches that wait on a GPU run (tall products folded, small complex products on the
# small-batched kernel, results ordered for their readers), as Python, all on
CANDIDATES="from skcontract.kernels import small_batched
from skcontract.plan import arrange, peak
small_batched.FOLD = peak.SMALL_FOLDS = True
small_batched.SINGLE_COMPLEX = True
peak.SMALL_COMPLEX_DTYPES = frozenset(small_batched.COMPLEX_TYPES)
arrange.ARRANGE = True"
DEPTHWISE=64x240x28x28x240x5x5x1x2x240
GROUPED=32x512x14x14x512x3x3x1x1x32
# decode products of Llama-2/3, Mistral and 13B models at batch 1-64 (M x N x K)
DECODE=4x13824x5120,8x11008x4096,16x8192x8192,8x4096x11008,4x14336x4096,16x14336x4096
DECODE=$DECODE,4x4096x14336,8x6144x4096,2x5120x5120,32x14336x4096,64x8192x8192,1x4096x4096
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for step in $STEPS; do
  echo "== $step ($(left) s left)"
  case $step in
    pointwise)
      timeout $(( $(left) > 200 ? 200 : $(left) )) python3 -m tools.time_gemm \
        --shapes 200704x128x24,200704x128x64,200704x144x24,49152x1024x64 --dtypes float16 \
        --layouts rc --peer --probe none,loads,mma --reps 9 2>&1 | quiet | tee "$OUT/probes.jsonl"
      timeout $(( $(left) > 80 ? 80 : $(left) )) python3 -m tools.time_gemm \
        --shapes 200704x128x24,200704x128x64 --dtypes float16 --layouts rc \
        --store tma,threads --reps 9 2>&1 | quiet | tee "$OUT/stores.jsonl"
      # the layers whose rows miss 32-byte sectors run on padded copies (conv_plan.py)
      timeout $(( $(left) > 110 ? 110 : $(left) )) python3 -m pytest -q -n 8 -p no:cacheprovider \
        tests/gpu/test_conv2d_gpu.py -k pointwise 2>&1 | tail -4
      timeout $(( $(left) > 60 ? 60 : $(left) )) python3 -m tools.time_conv --reps 9 \
        --layers 64x24x56x56x144x1x1x1x0,64x24x56x56x128x1x1x1x0,64x40x28x28x240x1x1x1x0 \
        2>&1 | quiet | tee "$OUT/pointwise-padded.jsonl" | cut -c1-330 ;;
    x3)
      timeout $(( $(left) > 170 ? 170 : $(left) )) python3 -m tools.x3_sweep --mn 2048 \
        --ks 16,32,64,128,256,1024,4096 --reps 5 2>&1 | quiet | tee "$OUT/x3-sweep.jsonl" ;;
    x3tests)
      timeout $(( $(left) > 220 ? 220 : $(left) )) python3 -m pytest -q -n 8 -p no:cacheprovider \
        tests/gpu/test_3xtf32.py tests/gpu/test_einsum_gpu.py tests/gpu/test_complex.py \
        tests/gpu/test_slicing_gpu.py tests/gpu/test_warm_path.py 2>&1 | tail -25 ;;
    shapes)
      SHAPES_CLASSES=${SHAPES_CLASSES:-exact-fp32} BENCH_S=$(( $(left) > 150 ? 150 : $(left) )) \
        OUT=$OUT bash tools/device_run.sh shapes 2>&1 | tail -30 ;;
    networks)
      timeout $(( $(left) > ${NETWORKS_S:-240} ? ${NETWORKS_S:-240} : $(left) )) python3 -m skcontract bench networks-run \
        --plans docs/benchmarks/networks-plans-h100.json --networks ${NETWORKS:-lattice,peps,regular} \
        ${NETWORK_LIMITS:+--limits $NETWORK_LIMITS} --planners ${PLANNERS:-hyper,cotengra} \
        --out "$OUT" --name networks-float32 2>&1 | quiet | tee "$OUT/networks.log" | tail -30 ;;
    tests)
      timeout $(( $(left) > 240 ? 240 : $(left) )) python3 -m pytest -q -n 8 -p no:cacheprovider \
        ${TEST_FILES:-tests/gpu/test_depthwise.py tests/gpu/test_complex.py tests/gpu/test_dot.py \
        tests/gpu/test_conv2d_gpu.py tests/gpu/test_parity_gpu.py} \
        -k "${TEST_K:-depthwise or Depthwise or square or complex or dot or Dot}" -rf --tb=short \
        > "$OUT/tests.txt" 2>&1
      # each failure's test and message, parameters dropped, counted; the tracebacks in tests.txt
      grep -E "^(FAILED|ERROR)" "$OUT/tests.txt" | sed -E 's/\[[^]]*\]//' | cut -c1-240 | \
        sort | uniq -c | sort -rn | head -25
      tail -2 "$OUT/tests.txt" ;;
    sanitize)
      for tool in memcheck racecheck; do
        for kernel in tensor_core square; do
          sel="tensor_core_kernel_matches and float16 and True"
          [ $kernel = square ] && sel="(square_and_any and float16 and True-False) or (wide_packs and float16 and False)"
          log="$OUT/san-$tool-$kernel.log"
          timeout $(( $(left) > 100 ? 100 : $(left) )) compute-sanitizer --tool $tool \
            --report-api-errors no --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
            tests/gpu/test_depthwise.py -k "$sel" > "$log" 2>&1
          echo "$tool $kernel rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$log" | tail -3
        done
      done
      timeout $(( $(left) > 100 ? 100 : $(left) )) compute-sanitizer --tool memcheck \
        --report-api-errors no --error-exitcode 9 python3 -m tools.sanitize_cases complex \
        > "$OUT/san-complex.log" 2>&1
      echo "memcheck complex rc=$?"; grep -E "ERROR SUMMARY|FAIL|^ok" "$OUT/san-complex.log" | tail -9 ;;
    depthwise)
      timeout $(( $(left) > 150 ? 150 : $(left) )) python3 -m tools.time_depthwise \
        --dtypes float16 --variants ${DW_VARIANTS:-auto,square,wide,mma} --reps 7 2>&1 | grep '^{' | \
        tee "$OUT/depthwise.jsonl" | cut -c1-300 ;;
    strip8)
      sed -i 's/  return step == 1 ? DEPTHWISE_STRIP : DEPTHWISE_STRIP \/ 2;/  return step == 1 ? 8 : 4;/' \
        skcontract/kernels/cuda/depthwise.cuh
      timeout 90 python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_depthwise.py \
        -k "float16 and square" 2>&1 | tail -2
      timeout $(( $(left) > 120 ? 120 : $(left) )) python3 -m tools.time_depthwise \
        --dtypes float16 --variants square --reps 7 2>&1 | grep '^{' | \
        tee "$OUT/depthwise-strip8.jsonl" | cut -c1-300
      git checkout -q skcontract/kernels/cuda/depthwise.cuh ;;
    complexbench)
      timeout $(( $(left) > 120 ? 120 : $(left) )) python3 -m skcontract bench complex \
        ${COMPLEX_ARGS---memory-bound} --reps 5 --out "$OUT" 2>&1 | quiet | tail -6 ;;
    longk)
      timeout $(( $(left) > 200 ? 200 : $(left) )) python3 -m tools.time_gemm \
        --shapes 768x768x16384,1024x128x32768,1024x1024x16384,768x2304x8192,512x512x65536,4096x16x8192 \
        --dtypes float16 --layouts cr --peer --mode auto,stream_k,split_k \
        --tile 128x128x64,64x256x64,128x256x64 --reduction deterministic,arrival --reps 7 2>&1 | \
        quiet | tee "$OUT/longk.jsonl" | cut -c1-260
      timeout $(( $(left) > 80 ? 80 : $(left) )) python3 -m tools.time_gemm \
        --shapes 256x256x65536,128x128x262144,768x768x16384 --dtypes float32 --layouts cr --peer \
        --mode auto,stream_k,split_k --reduction deterministic,arrival --reps 7 2>&1 | \
        quiet | tee -a "$OUT/longk.jsonl" | cut -c1-260 ;;
    skinny)
      timeout $(( $(left) > 120 ? 120 : $(left) )) python3 -m tools.time_gemm \
        --shapes 4x13824x5120,8x11008x4096,16x8192x8192 --dtypes float16 --layouts rr --peer \
        --mode auto,data_parallel,stream_k,split_k --tile 64x64x64,64x128x64,64x256x64 \
        --probe none,loads --reps 7 2>&1 | quiet | tee "$OUT/skinny.jsonl" | cut -c1-260 ;;
    smallcomplex)
      # the small-batched kernel's complex builds: their GPU tests, memcheck, and the
      # circuits' hyper plans run with small_batched.SINGLE_COMPLEX on ($OUT/smallcomplex/)
      mkdir -p "$OUT/smallcomplex"
      timeout $(( $(left) > 120 ? 120 : $(left) )) python3 -m pytest -q -n 8 -p no:cacheprovider \
        tests/gpu/test_small_batched.py -k "complex" -rf --tb=short \
        > "$OUT/smallcomplex/tests.txt" 2>&1; tail -3 "$OUT/smallcomplex/tests.txt"
      timeout $(( $(left) > 120 ? 120 : $(left) )) compute-sanitizer --tool memcheck \
        --report-api-errors no --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
        tests/gpu/test_small_batched.py -k "complex and C" > "$OUT/smallcomplex/memcheck.log" 2>&1
      echo "memcheck rc=$?"; grep "ERROR SUMMARY" "$OUT/smallcomplex/memcheck.log" | tail -1
      [ "${SC_CIRCUITS:-1}" = 0 ] || timeout $(( $(left) > 200 ? 200 : $(left) )) python3 -c "
import sys
from skcontract.kernels import small_batched
from skcontract.plan import peak
small_batched.SINGLE_COMPLEX = True
peak.SMALL_COMPLEX_DTYPES = frozenset(small_batched.COMPLEX_TYPES)
from skcontract.bench.networks_run import main
sys.exit(main(['--plans', 'docs/benchmarks/networks-plans-h100.json', '--networks',
               'circuit,circuit-open', '--planners', 'hyper', '--out', '$OUT/smallcomplex',
               '--name', 'circuits-single-complex']))" 2>&1 | quiet | tail -12 ;;
    fold)
      # tall products folded onto the small-batched kernel: its GPU tests, memcheck of the
      # folded ones, the tall-narrow and tiny-batched classes with the fold
      # (small_batched.FOLD) and without (the GEMM kernels' launch) against torch, the
      # regular graph with the fold ($OUT/fold/)
      mkdir -p "$OUT/fold"
      timeout $(( $(left) > 120 ? 120 : $(left) )) python3 -m pytest -q -n 8 -p no:cacheprovider \
        tests/gpu/test_small_batched.py -rf --tb=short > "$OUT/fold/tests.txt" 2>&1
      tail -3 "$OUT/fold/tests.txt"
      timeout $(( $(left) > 120 ? 120 : $(left) )) compute-sanitizer --tool memcheck \
        --report-api-errors no --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider \
        tests/gpu/test_small_batched.py -k "(folded and C) or one_b" > "$OUT/fold/memcheck.log" 2>&1
      echo "memcheck rc=$?"; grep "ERROR SUMMARY" "$OUT/fold/memcheck.log" | tail -1
      for fold in True False; do
        timeout $(( $(left) > 100 ? 100 : $(left) )) python3 -c "
import sys
from skcontract.kernels import small_batched
from skcontract.plan import peak
small_batched.FOLD = peak.SMALL_FOLDS = $fold
from skcontract.bench.shapes import main
sys.exit(main(['--classes', 'tall-narrow,tiny-batched', '--out', '$OUT/fold',
               '--name', 'fold-$fold']))" 2>&1 | quiet | grep -E "^\|" | cut -c1-220
        rm -f "$OUT/fold/fold-$fold.md"
      done
      timeout $(( $(left) > 100 ? 100 : $(left) )) python3 -c "
import sys
$CANDIDATES
from skcontract.bench.networks_run import main
sys.exit(main(['--plans', 'docs/benchmarks/networks-plans-h100.json', '--networks',
               'regular', '--limits', '1GiB', '--planners', 'hyper', '--out', '$OUT/fold',
               '--name', 'regular-candidates']))" 2>&1 | quiet | tail -4
      rm -f "$OUT/fold/regular-candidates.md" ;;
    candidates)
      # the networks' plans (hyper and cotengra) with the switches that wait on a GPU on
      # (CANDIDATES): the run to commit as docs/benchmarks/networks-<device>.json once they
      # go on ($OUT/networks-candidates.json)
      timeout $(( $(left) > ${NETWORKS_S:-300} ? ${NETWORKS_S:-300} : $(left) )) python3 -c "
import sys
$CANDIDATES
from skcontract.bench.networks_run import main
sys.exit(main(['--plans', 'docs/benchmarks/networks-plans-h100.json', '--networks',
               '${NETWORKS:-lattice,peps,regular,circuit,circuit-open}', '--planners',
               '${PLANNERS:-hyper,cotengra}', '--out', '$OUT', '--name',
               'networks-candidates']))" 2>&1 | quiet | grep -E "^\| " | cut -c1-200 ;;
    arrange)
      # the networks' hyper plans run as planned (results ordered for the steps reading
      # them, plan/arrange.py) and with that ordering off, same call ($OUT/arrange-*.json)
      for mode in on off; do
        timeout $(( $(left) > ${NETWORKS_S:-150} ? ${NETWORKS_S:-150} : $(left) )) python3 -c "
import sys
from skcontract.plan import arrange
arrange.ARRANGE = '$mode' == 'on'
from skcontract.bench.networks_run import main
sys.exit(main(['--plans', 'docs/benchmarks/networks-plans-h100.json', '--networks',
               '${NETWORKS:-lattice,peps,circuit,circuit-open,regular}', '--limits',
               '${NETWORK_LIMITS:-1GiB,8GiB}', '--planners', 'hyper', '--out', '$OUT',
               '--name', 'arrange-$mode']))" 2>&1 | quiet | grep -E "^\| .*hyper" | cut -c1-200
        rm -f "$OUT/arrange-$mode.md"
      done ;;
    netprofile)
      # where a network call's host time goes (cProfile of calls of one slice)
      for net in ${PROFILE_NETS:-circuit:8GiB regular:1GiB}; do
        timeout $(( $(left) > 120 ? 120 : $(left) )) python3 -m tools.profile_call \
          --network ${net%%:*} --limit ${net##*:} --calls 3 --top 30 2>&1 | quiet \
          > "$OUT/netprofile-${net%%:*}.txt"
        head -3 "$OUT/netprofile-${net%%:*}.txt"
        timeout $(( $(left) > 90 ? 90 : $(left) )) python3 -m tools.kernel_times \
          --network ${net%%:*} --limit ${net##*:} --calls 3 2>&1 | quiet | head -60 \
          >> "$OUT/netprofile-${net%%:*}.txt"
      done ;;
    decode)
      # auto against the tile the memory-bound rule gave before its one-wave tiles
      # (64 x 64, the model's mode), both against cuBLAS
      timeout $(( $(left) > 150 ? 150 : $(left) )) python3 -m tools.time_gemm \
        --shapes ${DECODE_SHAPES:-$DECODE} --dtypes float16 --layouts rr --peer \
        --mode auto --tile none,64x64x64 --reps 7 2>&1 | quiet | tee "$OUT/decode.jsonl" \
        | cut -c1-260 ;;
    conjdot)
      timeout $(( $(left) > 150 ? 150 : $(left) )) compute-sanitizer --tool memcheck \
        --report-api-errors no --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
        tests/gpu/test_complex.py -k conj > "$OUT/san-conj.log" 2>&1
      echo "memcheck conj rc=$?"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/san-conj.log" | tail -3
      mkdir -p "$OUT/conjdot"
      timeout $(( $(left) > 120 ? 120 : $(left) )) python3 -c "
import sys
from skcontract.kernels import step_launch
from skcontract.bench.complex import main
step_launch.DOT_READS_CONJUGATED = True
sys.exit(main(['--memory-bound', '--reps', '5', '--out', '$OUT/conjdot']))" 2>&1 | quiet | tail -6 ;;
    dask)
      timeout $(( $(left) > 150 ? 150 : $(left) )) python3 -m tools.bench_dask --gpu --n 8192 \
        --reps 5 2>&1 | quiet | tee "$OUT/dask-gpu.txt"
      timeout $(( $(left) > 120 ? 120 : $(left) )) python3 -m tools.bench_dask --gpu --n 16384 \
        --reps 3 2>&1 | quiet | tee -a "$OUT/dask-gpu.txt" ;;
    stalls)
      for layer in $DEPTHWISE $GROUPED; do
        [ "$(left)" -gt 60 ] || break
        timeout 90 ncu --section WarpStateStats --section SourceCounters --page source \
          --print-source sass --csv --kernel-name-base demangled -k regex:'skc::' -c 3 \
          python3 -m tools.time_conv --layers $layer --reps 1 > "$OUT/ncu-$layer.csv" 2> /dev/null
        python3 -m tools.ncu_stalls "$OUT/ncu-$layer.csv" --top 15 2>&1 | cut -c1-220
        timeout 60 python3 -m tools.time_conv --layers $layer --reps 9 2>&1 | quiet | cut -c1-400
      done ;;
  esac
done
echo "== done ($(left) s left)"
} > "$OUT/log.txt" 2>&1
tail -c 10000 "$OUT/log.txt"
