# Medic. `make demo` and `make test` set everything up themselves (virtualenv, pip, npm).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CONFIG ?= medic.yaml
CDK := PATH="$(CURDIR)/node_modules/node/bin:$$PATH" npx --no-install cdk

.PHONY: setup demo test test-real lint synth deploy diff bench clean

setup: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt cli/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt -e ./cli
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

demo: setup  ## replay the bundled scenarios on emulated AWS and print what Medic decided
	$(PY) -m sim demo

test: setup  ## unit, functional, infra, e2e (replay) and agent tests (real Slurm when installed), one worker a core
	$(PY) -m pytest -n auto --maxprocesses 4 --dist loadfile --no-loadscope-reorder --ignore=tests/real

test-real: setup  ## real training (torch), real Slurm, real hang, the real agent; only AWS emulated (docs/real-test.md)
	$(PY) -m pytest tests/real -p no:xdist -rP

lint: setup  ## ruff, then the import contracts in pyproject.toml (layers, no cycles; docs/architecture.md)
	$(PY) -m ruff check .
	PYTHONPATH=functions $(VENV)/bin/lint-imports

synth: setup  ## CONFIG=path/to/medic.yaml selects another config
	$(CDK) synth -c config=$(CONFIG) --quiet
	$(VENV)/bin/cfn-lint cdk.out/*.template.json || [ $$? -eq 4 ]

deploy: setup
	$(CDK) deploy -c config=$(CONFIG)

diff: setup
	$(CDK) diff -c config=$(CONFIG)

bench: setup
	$(PY) -m bench

clean:
	rm -rf cdk.out build .pytest_cache
