# Two commands for a fresh machine (Python 3.11 only): `make demo`, `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo demo-postgres rehearse test test-all lint stop screenshot

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0   # the CPU wheel; never let a resolver pick a CUDA build
	$(BIN)/pip install -q -e '.[dev]'
	# DeepSpeed ships only an sdist: build it against our CPU torch (no isolated build env,
	# which would download a CUDA torch). Used here to validate the ZeRO-3 config.
	DS_BUILD_OPS=0 $(BIN)/pip install -q --no-build-isolation 'deepspeed==0.19.8'
	$(BIN)/python scripts/fetch_punkt_tab.py   # NLTK data lm-eval's IFEval scorer needs (offline)
	touch $@

setup: $(VENV)/.installed

demo: setup
	bash scripts/demo.sh

demo-postgres: setup
	RSTAR_DB=postgres PREFECT_PORT=4202 bash scripts/demo.sh

# The paper's path at CPU sizes through Prefect (configs/rehearsal.yaml): make rehearse DATA=../shared/data
rehearse: setup
	bash scripts/rehearse.sh $(DATA) $(REHEARSE_ARGS)

test: setup
	OMP_NUM_THREADS=1 $(BIN)/pytest -q -m "not slow and not gpu" --durations=25

test-all: setup
	OMP_NUM_THREADS=1 $(BIN)/pytest -q -m "not gpu"

lint: setup
	$(BIN)/ruff check .

stop:
	bash scripts/stop.sh

screenshot: setup
	bash scripts/screenshot.sh
