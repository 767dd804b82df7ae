# gpulab: make up | make verify | make report | make down | make test
# Every target creates what it needs (venv, ./bin tools) first. See README.md.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
PYTHON_HOST ?= python3
VENV := $(CURDIR)/venv
PY := $(VENV)/bin/python
STACK ?= dev
# Local file state: no Pulumi account needed. Secrets use a passphrase; empty unless you set one.
export PULUMI_BACKEND_URL ?= file://$(CURDIR)/.state
export PULUMI_CONFIG_PASSPHRASE ?=
export PULUMI_SKIP_UPDATE_CHECK := true
export PATH := $(CURDIR)/bin:$(VENV)/bin:$(PATH)

.PHONY: help up down verify report test lint bench prereqs policy-venv stack clean

help:
	@echo "make up      build the lab (checks Docker, installs pinned kind/kubectl/pulumi into ./bin, runs pulumi up)"
	@echo "make verify  run the acceptance suite TC-01..TC-08 against the live lab"
	@echo "make report  print the per-card GPU allocation of every tenant (and save reports/allocation.png)"
	@echo "make down    pulumi destroy: removes every container, network and cluster the lab created"
	@echo "make test    offline unit, policy and script checks (no Docker needed)"

$(VENV)/.installed: requirements.txt requirements-dev.txt policies/requirements.txt
	@$(PYTHON_HOST) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "gpulab needs Python 3.11 or newer")'
	$(PYTHON_HOST) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

# The policy pack's own virtualenv, where the Pulumi CLI looks for it (policies/PulumiPolicy.yaml).
policies/venv/.installed: policies/requirements.txt
	$(PYTHON_HOST) -m venv policies/venv
	policies/venv/bin/python -m pip install --quiet -r policies/requirements.txt
	touch $@

prereqs: $(VENV)/.installed
	PYTHON=$(PY) bash scripts/prereqs.sh

policy-venv: policies/venv/.installed

stack: prereqs
	mkdir -p .state
	pulumi stack select --create $(STACK)

up: prereqs policy-venv stack
	pulumi up --yes --stack $(STACK) --policy-pack policies

down: prereqs
	pulumi destroy --yes --stack $(STACK)

verify: $(VENV)/.installed
	GPULAB_ACCEPTANCE=1 GPULAB_STACK=$(STACK) $(PY) -m pytest tests/acceptance -m acceptance -o addopts="" -rs -v \
	  --junitxml=reports/acceptance.xml

report: $(VENV)/.installed
	GPULAB_STACK=$(STACK) $(PY) -m report --png reports/allocation.png

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/shellcheck scripts/*.sh tests/fakes/*

test: lint
	$(PY) -m pytest

bench: $(VENV)/.installed
	$(PY) benchmarks/program_under_mocks.py
	$(PY) benchmarks/policy_check.py

clean:
	rm -rf $(VENV) policies/venv .pytest_cache .ruff_cache .hypothesis
