# Everything a fresh machine needs, from Python 3.11+ and make alone.
PYTHON ?= $(shell for p in python3.13 python3.12 python3.11 python3; do command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && echo $$p && break; done)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: demo test install bench lint format notebooks clean

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python 3.11 or newer is required (python3.11, python3.12, python3.13 or python3)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/throughput demo --out results

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_ceiling.py

notebooks: $(STAMP)
	$(BIN)/python -m pytest tests/test_notebooks.py $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check throughput tests benchmarks

format: $(STAMP)
	$(BIN)/ruff format throughput tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
