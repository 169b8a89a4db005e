# hpcstage — `make demo` and `make test` bootstrap everything they need into .venv.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck validate unit functional system bench bench-smoke clean slurm-start slurm-stop

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "hpcstage needs Python 3.11+"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/hpcstage demo

lint: $(STAMP)
	$(VENV)/bin/ruff check layers functions tests bench
	$(VENV)/bin/ruff format --check layers functions tests bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy
	# every handler is functions/<name>/app.py (Lambda's convention), so each is its own mypy run
	for f in functions/*/app.py; do $(VENV)/bin/mypy --follow-imports=silent $$f || exit 1; done

test: $(STAMP) lint typecheck
	$(VENV)/bin/pytest -q -m "not heavy"

bench: $(STAMP)
	$(PY) -m bench.run_all

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .aws-sam
