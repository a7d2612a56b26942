# Two commands on a fresh machine (see README): `make figures` and `make test`.
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

.PHONY: install figures test notebooks
install: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml constraints.txt tools/install.sh
	VENV=$(VENV) bash tools/install.sh
	touch $@

# Regenerate every figure: all lab notebooks under PROFILE (auto: full on a GPU, quick on CPU).
figures: install
	$(VENV)/bin/labkit run --all --profile $(PROFILE)

# Unit tests and a smoke-profile run of every notebook.
test: install
	$(VENV)/bin/python -m pytest -q

# Rebuild notebooks/*.ipynb from notebooks/src/*.py after editing a source.
notebooks: install
	$(VENV)/bin/python tools/build_notebooks.py
