# Two commands on a fresh machine (see README): `make figures` and `make test`; `make lab` to work through a lab.
VENV ?= .venv
SHARED_DATA := $(abspath ../shared/data)
# IMDb: $LABKIT_DATA_DIR if set, else ../shared/data when it exists (labkit also looks in data/).
LABKIT_DATA_DIR ?= $(if $(wildcard $(SHARED_DATA)/imdb),$(SHARED_DATA),)
export LABKIT_DATA_DIR
# Offline by default: the hub is never tried (set LABKIT_DATA_SOURCE=hub and these to 0 to go online).
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
PROFILE ?= auto

.PHONY: install figures test test-gpu notebooks lab dashboard
install: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml constraints.txt tools/install.sh
	VENV=$(VENV) bash tools/install.sh
	touch $@

# Regenerate every figure: all lab notebooks under PROFILE (auto: full on a GPU, quick on CPU).
figures: install
	$(VENV)/bin/labkit run --all --profile $(PROFILE)

# Unit tests and a smoke-profile run of every notebook: TEST_PROCESSES pytest-xdist processes (the notebooks' runs
# leave a core half idle), then the tests marked serial (they write into the tree) alone.
TEST_PROCESSES ?= 2
test: install
	$(VENV)/bin/python -m pytest -q -n $(TEST_PROCESSES) --dist loadgroup -m "not serial" --durations=20
	$(VENV)/bin/python -m pytest -q -m serial

# The GPU test set (on a CUDA machine): every test marked `cuda`. No GPU visible is an error, and so is a skipped
# CUDA test (LABKIT_REQUIRE_CUDA=1), never 0 tests passed. PY=python3 runs it with that Python as it is (e.g.
# the GPU kit's, with CUDA torch and Triton), installing nothing.
PY ?=
test-gpu: $(if $(PY),,install)
	$(or $(PY),$(VENV)/bin/python) -c "import sys, torch; sys.exit(None if torch.cuda.is_available() else \
	  f'make test-gpu: torch {torch.__version__} sees no CUDA GPU here (CUDA build: {torch.version.cuda})')"
	LABKIT_REQUIRE_CUDA=1 $(or $(PY),$(VENV)/bin/python) -m pytest -q -m cuda -rfE tests/

# Rebuild notebooks/*.ipynb from notebooks/src/*.py after editing a source.
notebooks: install
	$(VENV)/bin/python tools/build_notebooks.py

# JupyterLab on notebooks/ with the .venv kernel (installs JupyterLab on first use). PROFILE=smoke|quick|full
# sets what a notebook's PROFILE = "auto" means in this session.
lab: install
	$(VENV)/bin/labkit lab --profile $(PROFILE)

# optuna-dashboard on a lab's Optuna studies (LAB=lab2 or lab3).
LAB ?= lab2
dashboard: install
	$(VENV)/bin/labkit dashboard $(LAB)
