# hpcstage — `make demo` and `make test` bootstrap everything they need into .venv.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# what pip and apt print while bootstrapping goes here, not to the terminal; named when a step fails
INSTALL_LOG := .venv-install.log
quietly = { $(1); } >>$(INSTALL_LOG) 2>&1 || { echo "$(2) failed; its output is in $(INSTALL_LOG):" >&2; tail -n 20 $(INSTALL_LOG) >&2; exit 1; }
# aws-sam-cli pins an older boto3 than the project, so it lives in a venv of its own
SAM_VENV := .venv-sam
SAM := $(SAM_VENV)/bin/sam
# checkov pins its own dependency tree (boto3 among them), so it too lives in a venv of its own
CHECKOV_VENV := .venv-checkov
CHECKOV := $(CHECKOV_VENV)/bin/checkov

.PHONY: demo test local-slurm lint typecheck validate layer bench realtime-bench cpu-bench report-screenshot clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "hpcstage needs Python 3.11+"'
	@echo "installing hpcstage and its dependencies into $(VENV) (log: $(INSTALL_LOG))"
	@test -x $(PY) || $(call quietly,$(PYTHON) -m venv $(VENV),creating $(VENV))
	@$(call quietly,$(PY) -m pip install --upgrade pip,upgrading pip)
	@$(call quietly,$(PY) -m pip install -e '.[dev]',pip install -e .[dev])
	@touch $(STAMP)

$(SAM):
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet aws-sam-cli==1.170.0

$(CHECKOV):
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet checkov==3.3.30

# The Slurm tests and the demo's staging part run real jobs: start the local Slurm when this machine
# can (root; the script installs the packages with apt-get). Otherwise say why and go on: those tests
# then skip with the reason. With HPCSTAGE_REQUIRE_SLURM=1 (as .ci/run sets) a Slurm that does not
# come up is an error.
local-slurm:
	@if [ "$$(id -u)" != "0" ]; then \
	  msg="local Slurm not started: not root (as root: bash scripts/slurm-local.sh start)"; \
	elif echo "starting the local Slurm (log: $(INSTALL_LOG))" && bash scripts/slurm-local.sh start >>$(INSTALL_LOG) 2>&1; then \
	  msg=""; \
	else \
	  msg="local Slurm did not start (see $(INSTALL_LOG))"; \
	fi; \
	if [ -n "$$msg" ]; then \
	  if [ "$${HPCSTAGE_REQUIRE_SLURM:-0}" = "1" ]; then echo "$$msg; HPCSTAGE_REQUIRE_SLURM=1" >&2; exit 1; fi; \
	  echo "$$msg: the Slurm tests and the demo's staging part will skip"; \
	fi

demo: $(STAMP) local-slurm
	@$(VENV)/bin/hpcstage demo

# docs/report.png: two inventories of the demo layout with the real CLI, the second report in headless chromium
report-screenshot: $(STAMP)
	$(PY) scripts/report_example.py --screenshot docs/report.png

lint: $(STAMP)
	$(VENV)/bin/ruff check layers functions tests bench
	$(VENV)/bin/ruff format --check layers functions tests bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy
	# every handler is functions/<name>/app.py (Lambda's convention), so each is its own mypy run
	for f in functions/*/app.py; do $(VENV)/bin/mypy --follow-imports=silent $$f || exit 1; done

# cfn-lint, checkov, statelint, sam validate --lint and the ASL/template cross-checks (also part of `make test`)
validate: $(STAMP) $(SAM) $(CHECKOV)
	$(VENV)/bin/pytest -q tests/unit/test_templates.py

test: $(STAMP) $(SAM) $(CHECKOV) lint typecheck local-slurm
	$(VENV)/bin/pytest -q -m "not heavy" --durations=15

# build the Lambda layer with sam (python3.12 needed on PATH) and check its size against the 250 MB limit
layer: $(STAMP) $(SAM)
	$(PY) -m bench.layer_size

cpu-bench: $(STAMP)
	$(PY) -m bench.cpu_per_key --keys 1000000

# the work-stealing engine in the discrete-event simulator: every shape, 25M/100M/1B, fleet and peers
# (figures and the exact commands behind them: bench/RESULTS.md; a 1B fleet run takes a long time)
bench: $(STAMP)
	$(PY) -m bench.steal_bench --sizes 25e6,100e6,1e9 --shapes all --mode fleet,host,static --seeds 1

# listing in real time against a local endpoint with 50 ms pages: hpcstage, s5cmd du, aws s3 ls, rclone
realtime-bench: $(STAMP)
	$(PY) -m bench.realtime 1000000

clean:
	rm -rf $(VENV) $(SAM_VENV) $(CHECKOV_VENV) .pytest_cache .mypy_cache .ruff_cache .aws-sam bench/out hpcstage-demo hpcstage-example $(INSTALL_LOG)
