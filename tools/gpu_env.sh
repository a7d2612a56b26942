# Sourced by tools/gpu_run.sh: the repository root as cwd, the commit the results will name, the carried kit,
# labkit on the path, caches and $OUT.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ -n "${LABKIT_COMMIT:-}" ]] || { echo "set LABKIT_COMMIT (git rev-parse HEAD where the tree came from)" >&2; exit 2; }
export LABKIT_COMMIT
source .gpu-kit/setup.sh >/dev/null
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export LABKIT_CACHE_DIR=${LABKIT_CACHE_DIR:-/tmp/labkit-cache}
if [[ -f .gpu-kit/cutlass-include.tar.xz && -z "${CUTLASS_INCLUDE:-}" ]]; then  # the MXINT8 extension's headers
  mkdir -p /tmp/cutlass-include && tar -C /tmp/cutlass-include -xJf .gpu-kit/cutlass-include.tar.xz
  export CUTLASS_INCLUDE=/tmp/cutlass-include
fi
if [[ -f /tmp/labkit-gguf/model.gguf && -z "${LABKIT_SMOLLM2_GGUF:-}" ]]; then  # Lab 5's model (gpu_run.sh gguf)
  export LABKIT_SMOLLM2_GGUF=/tmp/labkit-gguf/model.gguf
fi
OUT=${OUT:-/tmp/labkit-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.used,driver_version --format=csv,noheader
