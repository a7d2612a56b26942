#!/usr/bin/env bash
# Run lab notebooks under the full profile on an offline GPU machine that has the kit
# (../shared/gpu/make-kit.sh .gpu-kit) beside the checkout; pack figures + executed notebooks into $OUT.
# Each notebook gets LABKIT_STEP_TIMEOUT seconds (default 540), so results are packed even if one overruns.
#   bash tools/gpu_full_run.sh lab0 lab1          (labs, or notebook stems like lab4_perf)
#
# Searches longer than one 10-minute call (Lab 2 full) continue across calls through their SQLite studies:
# results.tgz holds runs/optuna/; unpack that into .carry/runs/ here (git-ignored) and carry ".carry" in
# the next call, which copies it back to runs/ first, so every finished trial is kept and the study resumes:
#   mkdir -p .carry/runs && tar xzf <files_at>/results.tgz -C .carry runs/optuna
set -uo pipefail
cd "$(dirname "$0")/.."
# The copy on the GPU machine has no git history of its own: results must name the code that made them.
if [[ -z "${LABKIT_COMMIT:-}" ]]; then
  echo "gpu_full_run.sh: set LABKIT_COMMIT to the commit of this tree (git rev-parse HEAD where it came from)" >&2
  exit 2
fi
export LABKIT_COMMIT
source .gpu-kit/setup.sh
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
export LABKIT_CACHE_DIR=${LABKIT_CACHE_DIR:-/tmp/labkit-cache}
OUT=${OUT:-/tmp/labkit-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
if [[ -d .carry/runs ]]; then
  mkdir -p runs && cp -a .carry/runs/. runs/ && echo "resuming from carried state: $(ls .carry/runs)"
fi
run_one() {  # one lab or notebook stem under its own timeout; its log under $OUT
  local target=$1 start rc
  start=$(date +%s)
  if [[ $target == *_* ]]; then
    timeout "${LABKIT_STEP_TIMEOUT:-540}" python3 -c "from labkit import runner; from pathlib import Path
runner.run_notebook(Path('notebooks/$target.ipynb'), 'full', progress=False)"
  else
    timeout "${LABKIT_STEP_TIMEOUT:-540}" python3 -m labkit.cli run "$target" --profile full --no-progress ${LABKIT_SET:+--set "$LABKIT_SET"}
  fi
  rc=$?
  echo "== $target: $(( $(date +%s) - start )) s (exit $rc)"
  return $rc
}
status=0
if [[ -n "${LABKIT_PARALLEL:-}" ]]; then
  # several labs at once on the one GPU (trial loops are launch-bound: one lab leaves it partly idle);
  # never for timed labs (Lab 4), whose numbers need the GPU to themselves, and not two searches: Lab 2
  # and Lab 3's searches side by side (16 workers) ran an H100 out of memory
  pids=()
  for target in "$@"; do run_one "$target" >"$OUT/$target.log" 2>&1 & pids+=($!); done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  tail -n 3 "$OUT"/*.log
else
  for target in "$@"; do run_one "$target" 2>&1 | tee "$OUT/$target.log" || status=1; done
fi
# a timed-out notebook can leave search workers behind: stop them before packing their journal
pkill -f "labkit.search" 2>/dev/null; sleep 2
tar czf "$OUT/results.tgz" figures runs/full runs/optuna 2>/dev/null
exit $status
