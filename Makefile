# gpulab: make help lists every target.
# Every target creates what it needs (venv, ./bin tools) first. See README.md.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
PYTHON_HOST ?= python3
VENV := $(CURDIR)/venv
PY := $(VENV)/bin/python
STACK ?= dev
# Local file state: no Pulumi account needed. Secrets use a passphrase; empty unless you set one.
export PULUMI_BACKEND_URL ?= file://$(CURDIR)/.state
# The Pulumi CLI reads PULUMI_CONFIG_PASSPHRASE whenever it is set, even empty, before
# PULUMI_CONFIG_PASSPHRASE_FILE: with a file given, an empty passphrase must not be exported.
ifeq ($(PULUMI_CONFIG_PASSPHRASE_FILE),)
export PULUMI_CONFIG_PASSPHRASE ?=
else ifeq ($(PULUMI_CONFIG_PASSPHRASE),)
unexport PULUMI_CONFIG_PASSPHRASE
endif
export PULUMI_SKIP_UPDATE_CHECK := true
export PATH := $(CURDIR)/bin:$(VENV)/bin:$(PATH)

.PHONY: help up down plan verify report check test lint bench prereqs policy-venv stack upstream-data clean deploy destroy \
  diagnose

help:
	@echo "make up             preflight (Linux, Docker, tools, disk), then venv, pinned kind/kubectl/pulumi in ./bin, pulumi up"
	@echo "make plan           offline preview of STACK (default dev): validation, resources, outputs, policy verdicts"
	@echo "make verify         acceptance suite against the live lab; fails when there is none"
	@echo "make diagnose       why the lab is not ready: every cluster and tenant, a summary and reports/diagnose-*.tar.gz"
	@echo "make report         per-card GPU allocation of every tenant (and reports/allocation.png)"
	@echo "make check          TENANT=name FILES='a.yaml b.yaml' [LIVE=1]: do these manifests fit the tenant (now)?"
	@echo "make down           pulumi destroy; says so and exits 0 when nothing is deployed"
	@echo "make test           lint + offline unit, policy and script tests (no Docker); what CI runs"
	@echo "make upstream-data  download the upstream schemas/charts the tests validate against (sha256-checked)"
	@echo "make bench          benchmarks (program growth, policy checking)"
	@echo "make lint           ruff and shellcheck only"
	@echo "make clean          remove venv, policies/venv, bin, reports, caches (never .state: destroy first)"
	@echo "STACK=NAME picks another Pulumi.NAME.yaml (default dev)."

$(VENV)/.installed: requirements.txt requirements-dev.txt policies/requirements.txt
	@$(PYTHON_HOST) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "gpulab needs Python 3.11 or newer")'
	$(PYTHON_HOST) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	@# The venv's python finds gpulab's packages from any directory (python -m policies check ...).
	$(PY) -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "gpulab.pth").write_text("$(CURDIR)\n")'
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
	mkdir -p -m 700 .state
	pulumi stack select --create $(STACK)

# When up or verify fails: one line pointing at make diagnose, and the step's own exit code.
DIAGNOSE_HINT = { rc=$$?; echo "[gpulab] $@ failed: \`make diagnose STACK=$(STACK)\` tells why (summary + reports/diagnose-*.tar.gz)" >&2; exit $$rc; }

# Preflight first: nothing is installed or created on a host that cannot run the lab.
up:
	@bash scripts/preflight.sh || $(DIAGNOSE_HINT)
	@$(PYTHON_HOST) scripts/secrets_check.py $(STACK) || $(DIAGNOSE_HINT)
	@$(MAKE) --no-print-directory deploy || $(DIAGNOSE_HINT)

deploy: prereqs policy-venv stack
	@$(PYTHON_HOST) scripts/secrets_check.py $(STACK)
	pulumi up --yes --stack $(STACK) --policy-pack policies

# Nothing deployed: say so, download nothing. Otherwise Docker must answer before pulumi destroy runs.
down:
	@$(PYTHON_HOST) scripts/stack_state.py $(STACK) && $(MAKE) --no-print-directory destroy || [ $$? = 3 ]

destroy:
	@$(PYTHON_HOST) scripts/secrets_check.py $(STACK)
	bash scripts/preflight.sh --docker-only
	@$(MAKE) --no-print-directory prereqs
	@# --refresh first drops from the state what was deleted by hand: a worker container (the Docker provider
	@# stops a container before removing it and fails on one that is gone) and, through deleteUnreachable,
	@# the objects of a kind cluster or tenant that no longer answers.
	pulumi destroy --yes --refresh --stack $(STACK)

plan: $(VENV)/.installed
	@$(PY) scripts/secrets_check.py $(STACK)
	$(PY) -m preview --stack $(STACK)

verify: $(VENV)/.installed
	@$(PY) -m model.stack $(STACK) || $(DIAGNOSE_HINT)
	@GPULAB_ACCEPTANCE=1 GPULAB_STACK=$(STACK) $(PY) -m pytest tests/acceptance -m acceptance -o addopts="" -rs -v \
	  --junitxml=reports/acceptance.xml || $(DIAGNOSE_HINT)

# Every call bounded; exit 1 when something is not ready. DIAGNOSE_ARGS: e.g. --call-timeout 10.
diagnose: $(VENV)/.installed
	PYTHONDONTWRITEBYTECODE=1 $(PY) -m diagnose --stack $(STACK) $(DIAGNOSE_ARGS)

report: $(VENV)/.installed
	GPULAB_STACK=$(STACK) $(PY) -m report --png reports/allocation.png

check: $(VENV)/.installed
	@test -n "$(TENANT)" -a -n "$(FILES)" || { echo "usage: make check TENANT=name FILES='a.yaml ...' [LIVE=1]" >&2; exit 2; }
	$(PY) -m policies check --tenant "$(TENANT)" --stack "$(STACK)" $(if $(LIVE),--live) $(FILES)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/shellcheck scripts/*.sh tests/fakes/*

test: lint
	$(PY) -m pytest

upstream-data:
	$(PYTHON_HOST) tests/upstream_data.py

bench: $(VENV)/.installed
	$(PY) benchmarks/program_under_mocks.py
	$(PY) benchmarks/policy_check.py
	$(PY) benchmarks/image_pulls.py

clean:
	rm -rf $(VENV) policies/venv bin reports .cache .pytest_cache .ruff_cache .hypothesis
