#!/usr/bin/env bash
# The search's speed on a GPU machine, one call: the CUDA-graph tests, Lab 2 search throughput and the Lab 3 trial
# benchmark. Outputs under $OUT (logs + JSON). Carry .gpu-kit.
#   LABKIT_COMMIT=$(git rev-parse HEAD) bash tools/gpu_speed_run.sh [tests] [varlentests] [compiledtests] [stepcompiled] [compiledtput] [smshare] [stepattn] [attnacc] [signtests] [fqtests] [prunetests] [throughput] [profile] [task2] [task2wall] [lab3]
# compiledtests (stops the call when they fail): LABKIT_STEP_COMPILE=1's tests with the CUDA-graph tests; stepcompiled:
# the graphed step's time compiled by Inductor against the step kernels, determinism strict and off; compiledtput: Lab 2's
# search throughput with it and without (16 workers + MPS, the same call). smshare: one trial's weights without MPS, under
# MPS at 100% and 25% of the SMs, and after another trial (benchmarks/training/sm_share_bits.py).
# varlentests (stops the call when they fail): LABKIT_ATTENTION=varlen's CUDA tests and the CUDA-graph tests; stepattn:
# the graphed step's time with it against the masked SDPA ($OUT/lab2_step_attention.json); attnacc: Lab 2's accuracy per
# architecture with it and without, 3 training seeds, 16 workers + MPS, read paired per seed (--compare-accuracy).
# THROUGHPUT_ARGS: extra arguments for benchmarks/search/search_throughput.py (default: graphs on 1,4,8 workers).
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
export LABKIT_RUNS_DIR=${LABKIT_RUNS_DIR:-/tmp/labkit-runs} LABKIT_PROGRESS=${LABKIT_PROGRESS:-lines}
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
steps=${*:-tests throughput}
for step in $steps; do
  t0=$SECONDS
  case $step in
    tests) timeout 200 python3 -m pytest -q -p no:cacheprovider tests/training/test_cuda_graphs.py --durations=5 \
             >"$OUT/pytest_cuda_graphs.log" 2>&1; echo "tests rc=$?"; tail -12 "$OUT/pytest_cuda_graphs.log" ;;
    varlentests) timeout 200 python3 -m pytest -q -p no:cacheprovider tests/training/test_varlen_attention.py \
             tests/training/test_cuda_graphs.py --durations=5 >"$OUT/pytest_varlen.log" 2>&1; rc=$?
             echo "varlentests rc=$rc"; tail -12 "$OUT/pytest_varlen.log"; [[ $rc == 0 ]] || exit $rc ;;
    compiledtests) timeout 300 python3 -m pytest -q -p no:cacheprovider tests/training/test_compiled_step.py \
             tests/training/test_cuda_graphs.py --durations=5 >"$OUT/pytest_compiled.log" 2>&1; rc=$?
             echo "compiledtests rc=$rc"; tail -12 "$OUT/pytest_compiled.log"; [[ $rc == 0 ]] || exit $rc ;;
    stepcompiled) for d in ${STEPCOMPILED_DETERMINISM:-strict off}; do
               timeout 240 python3 benchmarks/training/lab2_step_kernels.py --compare compiled --determinism $d \
                 ${STEPCOMPILED_ARGS:-} \
                 --out "$OUT/lab2_step_compiled_$d.json" 2>&1 | grep -v -i "warn" | tail -8
             done ;;
    compiledtput) # search throughput, 16 workers + MPS, the compiled step against the step kernels, the same call
             [[ -f "$OUT/search_throughput.json" ]] || cp benchmarks/search/search_throughput.json "$OUT/"
             for c in 1 0; do
               LABKIT_STEP_COMPILE=$c LABKIT_BENCH_LABEL="(step compile $c, ${LABKIT_COMMIT:0:7})" timeout ${COMPILEDTPUT_TIMEOUT:-220} \
                 python3 benchmarks/search/search_throughput.py --profile full --serial-trials 0 --workers= --mps 16 \
                 --graphs on --per-worker 2 --resume --out "$OUT/search_throughput.json" 2>&1 | grep -v -i "warn" | tail -4
             done ;;
    smshare) timeout ${SMSHARE_TIMEOUT:-300} python3 benchmarks/training/sm_share_bits.py ${SMSHARE_ARGS:-} \
             --out "$OUT/sm_share_bits.json" 2>&1 | grep -v -i "warn" | tail -8 ;;
    stepattn) timeout 200 python3 benchmarks/training/lab2_step_kernels.py --compare attention \
             --out "$OUT/lab2_step_attention.json" 2>&1 | grep -v -i "warn" | tail -8 ;;
    attnacc) # accuracy per architecture, sdpa against varlen, 3 training seeds each, paired per seed
             [[ -f "$OUT/search_throughput.json" ]] || cp benchmarks/search/search_throughput.json "$OUT/"
             tag=${LABKIT_COMMIT:0:7}
             for a in sdpa varlen; do
               LABKIT_ATTENTION=$a LABKIT_BENCH_LABEL="(seeds, attention $a, $tag)" timeout ${ATTNACC_TIMEOUT:-200} \
                 python3 benchmarks/search/search_throughput.py --profile full --serial-trials 0 --workers= --mps 16 \
                 --graphs on --per-worker 1 --seeds 3 --resume --out "$OUT/search_throughput.json" 2>&1 \
                 | grep -v -i "warn" | tail -4
             done
             python3 benchmarks/search/search_throughput.py --out "$OUT/search_throughput.json" --compare-accuracy \
               "graphs, 16 worker(s) + MPS (seeds, attention varlen, $tag)" \
               "graphs, 16 worker(s) + MPS (seeds, attention sdpa, $tag)" ;;
    signtests) timeout 200 python3 -m pytest -q -p no:cacheprovider tests/quant/test_sign_matmul.py \
             >"$OUT/pytest_sign.log" 2>&1; echo "signtests rc=$?"; tail -8 "$OUT/pytest_sign.log" ;;
    fqtests) timeout ${FQ_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider tests/quant/test_fake_quant_triton.py ${FQ_MORE:-} \
             --durations=5 >"$OUT/pytest_fake_quant.log" 2>&1; echo "fqtests rc=$?"
             tail -12 "$OUT/pytest_fake_quant.log" ;;
    throughput) timeout ${THROUGHPUT_TIMEOUT:-420} python3 benchmarks/search/search_throughput.py --profile full \
             --serial-trials 0 ${THROUGHPUT_ARGS:---workers 1,4,8 --graphs on --per-worker 3} \
             --out "$OUT/search_throughput.json" 2>&1 | grep -v -i "warn" | tail -20 ;;
    profile) timeout ${PROFILE_TIMEOUT:-240} python3 benchmarks/training/lab2_trial_profile.py --profile full \
             --archs ${PROFILE_ARCHS:-0,2} ${PROFILE_ARGS:-} --out "$OUT/lab2_trial_profile.json" 2>&1 | grep -v -i "warn" | tail -20 ;;
    task2) timeout ${TASK2_TIMEOUT:-300} python3 benchmarks/search/task2_trial_profile.py --out "$OUT/task2_trial_profile.json" \
             ${TASK2_ARGS:-} 2>&1 | grep -v -i "warn\|USDT" | tail -40 ;;
    prunetests) timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_prune_mask_kernel.py tests/test_prune.py \
             tests/quant/test_qat_bf16.py >"$OUT/pytest_prune.log" 2>&1; echo "prunetests rc=$?"; tail -8 "$OUT/pytest_prune.log" ;;
    task2wall) cp benchmarks/search/task2_wall.json "$OUT/task2_wall.json"
             timeout ${TASK2WALL_TIMEOUT:-420} python3 benchmarks/search/task2_wall.py --schedule longest --start last-row \
             --out "$OUT/task2_wall.json" 2>&1 | grep -v -i "warn" | tail -6 ;;
    lab3) timeout ${LAB3_TIMEOUT:-500} python3 benchmarks/quant/lab3_trial.py --profile full --out "$OUT/lab3_trial.json" ${LAB3_ARGS:-} \
             2>&1 | grep -v -i "warn" | tail -30 ;;
  esac
  echo "== $step: $((SECONDS - t0)) s"
done
ls -la "$OUT"
