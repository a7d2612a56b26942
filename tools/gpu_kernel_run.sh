#!/usr/bin/env bash
# The fused MXINT8 linear on a GPU machine, one call: the fused MXINT8 kernel's CUDA tests, its launch-config sweep and the
# QAT step benchmark. Outputs under $OUT (logs + JSON). Carry .gpu-kit.
#   LABKIT_COMMIT=$(git rev-parse HEAD) bash tools/gpu_kernel_run.sh [tests] [sweep] [qat] [bench] [pdl] [dequant] [dtests] [gputests] [task2wall] [trialmem] [attnbwd]
# gputests: the whole GPU test set, as `make test-gpu PY=python3` runs it (a skipped CUDA test fails).
# task2wall: Lab 2 Task 2 from nothing under TASK2_SCHEDULE (longest, the default, or even): one row in $OUT.
# trialmem: one Lab 2 trial's GPU memory phase by phase, per allocator/graph variant ($OUT/trial_memory.json).
# attnbwd: Lab 2's attention forward+backward per SDPA backend, deterministic or not ($OUT/lab2_attention_bwd.json).
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
steps=${*:-tests sweep qat}
for step in $steps; do
  t0=$SECONDS
  case $step in
    tests) timeout 240 python3 -m pytest -q -p no:cacheprovider -m cuda tests/kernels/test_fused_mxint8.py --durations=8 \
             >"$OUT/pytest_cuda.log" 2>&1; echo "tests rc=$?"; tail -15 "$OUT/pytest_cuda.log" ;;
    sweep) timeout "${SWEEP_TIMEOUT:-330}" python3 benchmarks/mxint8/fused_linear_sweep.py --out "$OUT/fused_linear_sweep.json" ${SWEEP_ARGS:-} \
             2>&1 | tee "$OUT/sweep.log" | grep -v Warning ;;
    pdl) timeout "${PDL_TIMEOUT:-330}" python3 benchmarks/mxint8/fused_linear_pdl.py --out "$OUT/fused_linear_pdl.json" ${PDL_ARGS:-} \
           2>&1 | grep -v Warning ;;
    bench) timeout 320 python3 benchmarks/mxint8/fused_linear.py --out "$OUT/fused_linear.json" ${BENCH_ARGS:-} 2>&1 | grep -v Warning | tail -30 ;;
    dequant) timeout 300 python3 -m labkit.kernels.variants --out "$OUT/mxint8_variants.json" ${VARIANT_ARGS:-} \
               2>&1 | grep -v Warning | tail -60 ;;
    gputests) LABKIT_REQUIRE_CUDA=1 timeout 500 python3 -m pytest -q -p no:cacheprovider -m cuda -rfE tests/ --durations=8 \
                >"$OUT/pytest_gpu.log" 2>&1; echo "gputests rc=$?"; tail -25 "$OUT/pytest_gpu.log" ;;
    task2wall) timeout "${TASK2_TIMEOUT:-540}" python3 benchmarks/search/task2_wall.py --schedule "${TASK2_SCHEDULE:-longest}" \
                 --out "$OUT/task2_wall.json" 2>&1 | grep -v Warning | tail -12 ;;
    attnbwd) timeout 200 python3 benchmarks/training/lab2_attention_bwd.py --out "$OUT/lab2_attention_bwd.json" 2>&1 \
               | grep -v Warning | tail -40 ;;
    trialmem) timeout "${TRIALMEM_TIMEOUT:-480}" python3 benchmarks/search/trial_memory.py --out "$OUT/trial_memory.json" 2>&1 \
                | grep -v Warning | tail -8 ;;
    dtests) timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_mxint8.py --durations=5 \
              >"$OUT/pytest_mxint8.log" 2>&1; echo "dequant tests rc=$?"; tail -8 "$OUT/pytest_mxint8.log" ;;
    qat) IFS=, read -ra variants <<<"${QAT_VARIANTS:-fp32,bf16,fp32 --compile-model,bf16 --no-compile --compile-model}"
         for v in "${variants[@]}"; do
           tag=$(echo "$v" | tr -d ' -')
           timeout 150 python3 benchmarks/quant/qat_step.py --device cuda --qat-matmul $v --profile \
             --out "$OUT/qat_$tag.json" 2>&1 | grep -v -i warn | tail -16
         done ;;
  esac
  echo "== $step: $((SECONDS - t0)) s"
done
ls -la "$OUT"
