#!/usr/bin/env bash
# One full-profile regeneration on an offline GPU machine, in calls of at most ~9 minutes, resumable
# (labkit/maintain/regenerate.py): each call runs the plan's unfinished notebooks that fit its budget and packs
#   $OUT/state.tgz    runs/regen (what is done, per-call timings, SFT digests) + unfinished searches' journals +
#                     runs/seeds (each finished training seed of a per-seed notebook)
#   $OUT/results.tgz  figures/, the executed notebooks runs/full/*.ipynb, the calls' logs
# Between calls, here:  mkdir -p .carry && tar xzf <files_at>/state.tgz -C .carry   (carry ".carry" and
# ".gpu-kit" in the next call; tools/make_gpu_kit.sh builds the kit, CUTLASS headers included).
#   LABKIT_COMMIT=$(git rev-parse HEAD) [LABKIT_PARALLEL=1] bash tools/gpu_full_run.sh [--fresh] [--budget 540] \
#     [notebook ...]
# LABKIT_PARALLEL=1 first runs the untimed notebooks that fit side by side, under a CUDA MPS daemon
# (labkit.maintain.regenerate --parallel; LABKIT_REGEN_MPS=off without one).
# On a host with several GPUs the notebooks run in lanes, one per GPU (labkit.maintain.regenerate --gpus).
# --fresh (the first call of a from-scratch regeneration only): every step pending again, searches from nothing;
# the state it would have resumed (carried or committed) is kept in the new state's history.
set -uo pipefail
budget=540 fresh=""
while [[ ${1:-} == --* ]]; do
  case $1 in
    --budget) budget=$2; shift 2 ;;
    --fresh) fresh=--fresh; shift ;;
    *) echo "gpu_full_run.sh: unknown option $1; allowed: --fresh, --budget SECONDS, then notebook names" >&2; exit 2 ;;
  esac
done
# the commit (the copy on the GPU machine has no git history: results must name the code that made them),
# the kit, caches, the CUTLASS headers and $OUT
source "$(dirname "$0")/gpu_env.sh"
export TOKENIZERS_PARALLELISM=true
export CUBLAS_WORKSPACE_CONFIG=:4096:8   # reproducible cuBLAS (the SFT model retrained in a later call)
python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
calls() { python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['calls']))" "$1" 2>/dev/null || echo 0; }
# which regeneration a state belongs to: when its --fresh start began ("-" before any)
regen() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('fresh', {}).get('started', '-'))" \
  "$1" 2>/dev/null || echo none; }
if [[ -d .carry/runs ]]; then
  # a warm machine keeps runs/ from its last call: newer than a carried state of the same regeneration made
  # before that call
  if [[ $(regen runs/regen/state.json) == "$(regen .carry/runs/regen/state.json)" ]] &&
     (( $(calls runs/regen/state.json) > $(calls .carry/runs/regen/state.json) )); then
    echo "keeping this machine's state ($(calls runs/regen/state.json) calls) over the carried one"
  else
    mkdir -p runs && cp -a .carry/runs/. runs/ && echo "resuming from carried state: $(ls .carry/runs)"
  fi
fi
python3 -m labkit.maintain.regenerate --budget "$budget" $fresh ${LABKIT_PARALLEL:+--parallel} ${1:+--only "$@"}
status=$?
# a timed-out notebook can leave search workers behind: stop them before packing their journal
pkill -f "labkit.search" 2>/dev/null; sleep 1
# the journals of unfinished searches only: a finished one is published beside its figures (results.tgz), and
# carrying it again would eat the 64 MiB a call may carry (the kit takes 49)
journals=$(python3 -c "from labkit.maintain import regenerate as r
print(' '.join(f'runs/optuna/{s.search}.journal' for s in r.pending(r.load_state()) if s.search))")
tar czf "$OUT/state.tgz" runs/regen/state.json $(ls $journals 2>/dev/null) $(ls -d runs/seeds 2>/dev/null)
tar czf "$OUT/results.tgz" figures runs/full runs/regen/logs 2>/dev/null
ls -la "$OUT"
exit $status
