#!/usr/bin/env bash
# The GPU steps of one call on an offline GPU machine: a full-profile regeneration, or named test and benchmark
# steps run in the order given. Outputs under $OUT (logs + JSON). Carry .gpu-kit (tools/make_gpu_kit.sh builds it,
# CUTLASS headers included).
#   LABKIT_COMMIT=$(git rev-parse HEAD) bash tools/gpu_run.sh STEP [STEP ...]
#   LABKIT_COMMIT=$(git rev-parse HEAD) [LABKIT_PARALLEL=1] bash tools/gpu_run.sh regen [--fresh] [--budget 540] [notebook ...]
#
# regen (alone in its call): one call of a full-profile regeneration, resumable (labkit/maintain/regenerate.py): it
#   runs the plan's unfinished notebooks that fit its budget and packs
#     $OUT/state.tgz    runs/regen (what is done, per-call timings, SFT digests) + unfinished searches' journals +
#                       runs/seeds (each finished training seed of a per-seed notebook)
#     $OUT/results.tgz  figures/, the executed notebooks runs/full/*.ipynb, the calls' logs
#     $OUT/state.json   the record alone (it comes back where state.tgz is over a call's size limit)
#   Between calls, here: mkdir -p .carry && tar xzf <files_at>/state.tgz -C .carry (carry ".carry" and ".gpu-kit" in
#   the next call), or python tools/land_gpu_call.py <files_at>. LABKIT_PARALLEL=1 first runs the untimed notebooks
#   that fit side by side, under a CUDA MPS daemon (labkit.maintain.regenerate --parallel; LABKIT_REGEN_MPS=off
#   without one). On a host with several GPUs the notebooks run in lanes, one per GPU. --fresh (the first call of a
#   from-scratch regeneration only): every step pending again, searches from nothing; the state it would have
#   resumed (carried or committed) is kept in the new state's history.
#
# gguf (alone in its call, no kit needed): Lab 5's model arrives in parts, one call each, on a warm machine (the next
#   call within 30 s): each call carries one part of .gpu-kit-gguf (tools/make_gpu_kit.sh writes them, with PARTS
#   and SHA256); the call that completes the set joins and checks it into /tmp/labkit-gguf/model.gguf, which
#   gpu_env.sh then exports as LABKIT_SMOLLM2_GGUF. Carry .gpu-kit-gguf/PARTS and .gpu-kit-gguf/SHA256 each time.
#
# Test steps (each writes $OUT/pytest_<step>.log; those marked * stop the call when they fail):
#   gputests      the whole GPU test set, as `make test-gpu PY=python3` runs it (a skipped CUDA test fails)
#   mxtests       the fused MXINT8 kernel's CUDA tests        dtests      the MXINT8 dequantization kernel's tests
#   graphtests    the CUDA-graph training tests              signtests   the binary formats' sign GEMM
#   varlentests*  LABKIT_ATTENTION=varlen's tests with the CUDA-graph tests
#   compiledtests* LABKIT_STEP_COMPILE=1's tests with the CUDA-graph tests
#   fqtests       the one-pass Triton fake quantization (FQ_MORE: more pytest arguments)
#   prunetests    the activation-mask kernel, pruning and the bf16 QAT path
#   llmtests      Lab 5's CUDA tests: the graphed decode step (bf16, MXINT8)
# Benchmark steps (benchmarks/README.md says what each measures; *_ARGS add arguments, *_TIMEOUT the limit):
#   bench         benchmarks/mxint8/fused_linear.py (BENCH_ARGS)                          -> $OUT/fused_linear.json
#   sweep         benchmarks/mxint8/fused_linear_sweep.py (SWEEP_ARGS)                    -> $OUT/fused_linear_sweep.json
#   pdl           benchmarks/mxint8/fused_linear_sweep.py --pdl (PDL_ARGS)                -> $OUT/fused_linear_pdl.json
#   dequant       python -m labkit.kernels.variants (VARIANT_ARGS)                        -> $OUT/mxint8_variants.json
#   qat           benchmarks/quant/qat_step.py per QAT_VARIANTS (comma-separated)         -> $OUT/qat_<variant>.json
#   lab3          benchmarks/quant/lab3_trial.py --profile full (LAB3_ARGS)               -> $OUT/lab3_trial.json
#   throughput    benchmarks/search/search_throughput.py --profile full (THROUGHPUT_ARGS, default graphs on 1,4,8
#                 workers)                                                                -> $OUT/search_throughput.json
#   compiledtput  search throughput, 16 workers + MPS, LABKIT_STEP_COMPILE=1 against 0 in the same call (rows added
#                 to a copy of the committed search_throughput.json)
#   attnacc       accuracy per architecture, LABKIT_ATTENTION=sdpa against varlen, 3 training seeds, 16 workers +
#                 MPS, read paired per seed (--compare-accuracy)
#   profile       benchmarks/training/lab2_trial_profile.py --profile full (PROFILE_ARCHS, PROFILE_ARGS)
#   stepcompiled  benchmarks/training/lab2_step_kernels.py --compare compiled per STEPCOMPILED_DETERMINISM
#                 (strict off)                                                 -> $OUT/lab2_step_compiled_<mode>.json
#   stepattn      benchmarks/training/lab2_step_kernels.py --compare attention            -> $OUT/lab2_step_attention.json
#   task2         benchmarks/search/task2_trial_profile.py (TASK2_ARGS)                   -> $OUT/task2_trial_profile.json
#   task2wall     benchmarks/search/task2_wall.py: Lab 2 Task 2 from nothing under TASK2_SCHEDULE (longest, the
#                 default, or even) from TASK2_START (last-row, the default, or committed); one row added to a copy
#                 of the committed task2_wall.json                                        -> $OUT/task2_wall.json
#   decodespeed   python -m labkit.llm.decode_speed (DECODE_ARGS): Lab 5's decode sweep   -> $OUT/decode_speed.json
#   trialmem      benchmarks/search/trial_memory.py: one Lab 2 trial's GPU memory phase by phase, per variant
#                                                                                         -> $OUT/trial_memory.json
set -uo pipefail
usage="usage: LABKIT_COMMIT=\$(git rev-parse HEAD) bash tools/gpu_run.sh STEP [STEP ...] | regen [--fresh] [--budget S] [notebook ...] | gguf"
STEPS="gputests mxtests dtests graphtests signtests varlentests compiledtests fqtests prunetests llmtests bench sweep pdl
dequant decodespeed qat lab3 throughput compiledtput attnacc profile stepcompiled stepattn task2 task2wall trialmem"
(( $# )) || { echo "$usage" >&2; echo "steps: regen gguf $STEPS" | tr '\n' ' ' >&2; echo >&2; exit 2; }
if [[ $1 == gguf ]]; then
  cd "$(dirname "$0")/.." && kit=.gpu-kit-gguf dest=/tmp/labkit-gguf && mkdir -p $dest
  [[ -f $kit/PARTS && -f $kit/SHA256 ]] || { echo "gguf: carry $kit/PARTS and $kit/SHA256 with a part" >&2; exit 2; }
  for part in $(cat $kit/PARTS); do [[ -f $kit/$part ]] && cp $kit/$part $dest/; done
  missing=$(for part in $(cat $kit/PARTS); do [[ -f $dest/$part ]] || echo "$part"; done)
  if [[ -n $missing ]]; then echo "gguf: have $(ls $dest | tr '\n' ' '); still to carry: $missing"; exit 0; fi
  (cd $dest && cat $(cat "$OLDPWD/$kit/PARTS") > model.gguf && rm -f part*)
  [[ $(sha256sum $dest/model.gguf | cut -d' ' -f1) == "$(cat $kit/SHA256)" ]] || {
    echo "gguf: the joined file's sha256 is not $(cat $kit/SHA256)" >&2; rm -f $dest/model.gguf; exit 1; }
  echo "gguf: $dest/model.gguf complete and checked"; exit 0
fi
if [[ $1 != regen ]]; then
  for step in "$@"; do
    [[ " $(echo $STEPS) " == *" $step "* ]] || {
      echo "gpu_run.sh: unknown step '$step'; allowed: regen (alone), $(echo $STEPS)" >&2; exit 2; }
  done
fi
# the commit (the copy on the GPU machine has no git history: results must name the code that made them),
# the kit, caches, the CUTLASS headers and $OUT
source "$(dirname "$0")/gpu_env.sh"
python3 -c "
import torch
line = f'torch {torch.__version__} cuda {torch.version.cuda}'
for lib in ('triton', 'transformers'):
    try:
        line += f' {lib} {__import__(lib).__version__}'
    except ImportError:
        line += f' {lib} -'
print(line)"

regen() {
  local budget=540 fresh=""
  while [[ ${1:-} == --* ]]; do
    case $1 in
      --budget) budget=$2; shift 2 ;;
      --fresh) fresh=--fresh; shift ;;
      *) echo "gpu_run.sh regen: unknown option $1; allowed: --fresh, --budget SECONDS, then notebook names" >&2
         exit 2 ;;
    esac
  done
  export TOKENIZERS_PARALLELISM=true
  export CUBLAS_WORKSPACE_CONFIG=:4096:8   # reproducible cuBLAS (the SFT model retrained in a later call)
  calls() { python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['calls']))" "$1" 2>/dev/null || echo 0; }
  # which regeneration a state belongs to: when its --fresh start began ("-" before any)
  which_regen() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('fresh', {}).get('started', '-'))" \
    "$1" 2>/dev/null || echo none; }
  if [[ -d .carry/runs ]]; then
    # a warm machine keeps runs/ from its last call: newer than a carried state of the same regeneration made
    # before that call
    if [[ $(which_regen runs/regen/state.json) == "$(which_regen .carry/runs/regen/state.json)" ]] &&
       (( $(calls runs/regen/state.json) > $(calls .carry/runs/regen/state.json) )); then
      echo "keeping this machine's state ($(calls runs/regen/state.json) calls) over the carried one"
    else
      mkdir -p runs && cp -a .carry/runs/. runs/ && echo "resuming from carried state: $(ls .carry/runs)"
    fi
  fi
  python3 -m labkit.maintain.regenerate --budget "$budget" $fresh ${LABKIT_PARALLEL:+--parallel} ${1:+--only "$@"}
  local status=$?
  # a timed-out notebook can leave search workers behind: stop them before packing their journal
  pkill -f "labkit.search" 2>/dev/null; sleep 1
  # the journals of unfinished searches only: a finished one is published beside its figures (results.tgz), and
  # carrying it again would eat the 64 MiB a call may carry (the kit takes 49)
  local journals
  # (those that exist: tar fails on a missing one)
  journals=$(python3 -c "from pathlib import Path
from labkit.maintain import regenerate as r
paths = (Path(f'runs/optuna/{s.search}.journal') for s in r.pending(r.load_state()) if s.search)
print(' '.join(str(p) for p in paths if p.is_file()))")
  tar czf "$OUT/state.tgz" runs/regen/state.json $journals $(ls -d runs/seeds 2>/dev/null)
  tar czf "$OUT/results.tgz" figures runs/full runs/regen/logs 2>/dev/null
  cp runs/regen/state.json "$OUT/state.json"  # the record alone: it comes back even if state.tgz is too big
  ls -la "$OUT"
  exit $status
}

if [[ $1 == regen ]]; then
  shift
  regen "$@"
fi

export LABKIT_RUNS_DIR=${LABKIT_RUNS_DIR:-/tmp/labkit-runs} LABKIT_PROGRESS=${LABKIT_PROGRESS:-lines}
quiet() { grep -v -i "warn\|USDT"; }
# pytest over the given files into $OUT/pytest_<name>.log; its rc, and the log's last lines
tests() {
  local name=$1 limit=$2; shift 2
  timeout "$limit" python3 -m pytest -q -p no:cacheprovider "$@" >"$OUT/pytest_$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc"; tail -15 "$OUT/pytest_$name.log"
  return $rc
}
for step in "$@"; do
  t0=$SECONDS
  case $step in
    gputests) LABKIT_REQUIRE_CUDA=1 tests gputests 500 -m cuda -rfE tests/ --durations=8 ;;
    mxtests) tests mxtests 240 -m cuda tests/kernels/test_fused_mxint8.py --durations=8 ;;
    dtests) tests dtests 200 tests/kernels/test_mxint8.py --durations=5 ;;
    graphtests) tests graphtests 200 tests/training/test_cuda_graphs.py --durations=5 ;;
    signtests) tests signtests 200 tests/quant/test_sign_matmul.py ;;
    varlentests) tests varlentests 200 tests/training/test_varlen_attention.py tests/training/test_cuda_graphs.py \
                   --durations=5 || exit $? ;;
    compiledtests) tests compiledtests 300 tests/training/test_compiled_step.py tests/training/test_cuda_graphs.py \
                     --durations=5 || exit $? ;;
    fqtests) tests fqtests "${FQ_TIMEOUT:-240}" tests/quant/test_fake_quant_triton.py ${FQ_MORE:-} --durations=5 ;;
    prunetests) tests prunetests 200 tests/test_prune_mask_kernel.py tests/test_prune.py tests/quant/test_qat_bf16.py ;;
    llmtests) tests llmtests 200 -m cuda tests/llm tests/perf/test_timing.py --durations=5 ;;
    decodespeed) timeout "${DECODE_TIMEOUT:-400}" python3 -m labkit.llm.decode_speed --out "$OUT/decode_speed.json" \
      ${DECODE_ARGS:-} 2>&1 | tee "$OUT/decode_speed.log" ;;
    bench) timeout "${BENCH_TIMEOUT:-320}" python3 benchmarks/mxint8/fused_linear.py --out "$OUT/fused_linear.json" \
             ${BENCH_ARGS:-} 2>&1 | quiet | tail -30 ;;
    sweep) timeout "${SWEEP_TIMEOUT:-330}" python3 benchmarks/mxint8/fused_linear_sweep.py \
             --out "$OUT/fused_linear_sweep.json" ${SWEEP_ARGS:-} 2>&1 | tee "$OUT/sweep.log" | quiet ;;
    pdl) timeout "${PDL_TIMEOUT:-330}" python3 benchmarks/mxint8/fused_linear_sweep.py --pdl \
           --out "$OUT/fused_linear_pdl.json" ${PDL_ARGS:-} 2>&1 | quiet ;;
    dequant) timeout 300 python3 -m labkit.kernels.variants --out "$OUT/mxint8_variants.json" ${VARIANT_ARGS:-} \
               2>&1 | quiet | tail -60 ;;
    qat) IFS=, read -ra variants <<<"${QAT_VARIANTS:-fp32,bf16,fp32 --compile-model,bf16 --no-compile --compile-model}"
         for v in "${variants[@]}"; do
           tag=$(echo "$v" | tr -d ' -')
           timeout 150 python3 benchmarks/quant/qat_step.py --device cuda --qat-matmul $v --profile \
             --out "$OUT/qat_$tag.json" 2>&1 | quiet | tail -16
         done ;;
    lab3) timeout "${LAB3_TIMEOUT:-500}" python3 benchmarks/quant/lab3_trial.py --profile full \
            --out "$OUT/lab3_trial.json" ${LAB3_ARGS:-} 2>&1 | quiet | tail -30 ;;
    throughput) timeout "${THROUGHPUT_TIMEOUT:-420}" python3 benchmarks/search/search_throughput.py --profile full \
                  --serial-trials 0 ${THROUGHPUT_ARGS:---workers 1,4,8 --graphs on --per-worker 3} \
                  --out "$OUT/search_throughput.json" 2>&1 | quiet | tail -20 ;;
    compiledtput) # search throughput, 16 workers + MPS, the compiled step against the step kernels, the same call
      [[ -f "$OUT/search_throughput.json" ]] || cp benchmarks/search/search_throughput.json "$OUT/"
      for c in 1 0; do
        LABKIT_STEP_COMPILE=$c LABKIT_BENCH_LABEL="(step compile $c, ${LABKIT_COMMIT:0:7})" \
          timeout "${COMPILEDTPUT_TIMEOUT:-220}" python3 benchmarks/search/search_throughput.py --profile full \
          --serial-trials 0 --workers= --mps 16 --graphs on --per-worker 2 --resume --out "$OUT/search_throughput.json" \
          2>&1 | quiet | tail -4
      done ;;
    attnacc) # accuracy per architecture, sdpa against varlen, 3 training seeds each, paired per seed
      [[ -f "$OUT/search_throughput.json" ]] || cp benchmarks/search/search_throughput.json "$OUT/"
      tag=${LABKIT_COMMIT:0:7}
      for a in sdpa varlen; do
        LABKIT_ATTENTION=$a LABKIT_BENCH_LABEL="(seeds, attention $a, $tag)" timeout "${ATTNACC_TIMEOUT:-200}" \
          python3 benchmarks/search/search_throughput.py --profile full --serial-trials 0 --workers= --mps 16 \
          --graphs on --per-worker 1 --seeds 3 --resume --out "$OUT/search_throughput.json" 2>&1 | quiet | tail -4
      done
      python3 benchmarks/search/search_throughput.py --out "$OUT/search_throughput.json" --compare-accuracy \
        "graphs, 16 worker(s) + MPS (seeds, attention varlen, $tag)" \
        "graphs, 16 worker(s) + MPS (seeds, attention sdpa, $tag)" ;;
    profile) timeout "${PROFILE_TIMEOUT:-240}" python3 benchmarks/training/lab2_trial_profile.py --profile full \
               --archs "${PROFILE_ARCHS:-0,2}" ${PROFILE_ARGS:-} --out "$OUT/lab2_trial_profile.json" 2>&1 | quiet | tail -20 ;;
    stepcompiled) for d in ${STEPCOMPILED_DETERMINISM:-strict off}; do
        timeout 240 python3 benchmarks/training/lab2_step_kernels.py --compare compiled --determinism "$d" \
          ${STEPCOMPILED_ARGS:-} --out "$OUT/lab2_step_compiled_$d.json" 2>&1 | quiet | tail -8
      done ;;
    stepattn) timeout 200 python3 benchmarks/training/lab2_step_kernels.py --compare attention \
                --out "$OUT/lab2_step_attention.json" 2>&1 | quiet | tail -8 ;;
    task2) timeout "${TASK2_TIMEOUT:-300}" python3 benchmarks/search/task2_trial_profile.py \
             --out "$OUT/task2_trial_profile.json" ${TASK2_ARGS:-} 2>&1 | quiet | tail -40 ;;
    task2wall) [[ -f "$OUT/task2_wall.json" ]] || cp benchmarks/search/task2_wall.json "$OUT/task2_wall.json"
      timeout "${TASK2WALL_TIMEOUT:-540}" python3 benchmarks/search/task2_wall.py --schedule "${TASK2_SCHEDULE:-longest}" \
        --start "${TASK2_START:-last-row}" --out "$OUT/task2_wall.json" 2>&1 | quiet | tail -8 ;;
    trialmem) timeout "${TRIALMEM_TIMEOUT:-480}" python3 benchmarks/search/trial_memory.py \
                --out "$OUT/trial_memory.json" 2>&1 | quiet | tail -8 ;;
  esac
  echo "== $step: $((SECONDS - t0)) s"
done
ls -la "$OUT"
