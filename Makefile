# gpulab: make help lists every target.
# Every target creates what it needs (venv, ./bin tools) first. See README.md.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
PYTHON_HOST ?= python3
VENV := $(CURDIR)/venv
PY := $(VENV)/bin/python
STACK ?= dev
# uv (a PyPI package, pinned) installs the dev venv's ~80 packages in parallel: seconds, not a silent minute.
UV_VERSION := 0.13.9
# Test workers (pytest-xdist). make test's unit tier computes and never waits: one more worker than the cores. On 2
# cores, 2026-12-05, its first cut (1616 tests): quiet, 3 workers 38.8 s and 73 CPU-s, 6 workers 53.7 s and 104 CPU-s;
# beside two busy loops, 3 workers 62.1 s, 4 workers 70.8 s. Past the cores a worker only adds its collection and
# contention (docs/contributing.md).
# make test-integration's tests wait out bounded deadlines about as long as they compute: four more than the cores.
# 0: one process.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
INTEGRATION_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 4 )))
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
# gpulab's entry points run as modules from here (python3 -m hack.stack_state): with PYTHONSAFEPATH set, python -m
# would not look in the current folder for them.
unexport PYTHONSAFEPATH
# GPULAB_HOST_TOOLS=DIR: your own kind, kubectl and Pulumi CLI, first on PATH and used as they are (prereqs.sh).
export PATH := $(if $(GPULAB_HOST_TOOLS),$(abspath $(GPULAB_HOST_TOOLS)):)$(CURDIR)/bin:$(VENV)/bin:$(PATH)
# The stack's runtime: docker, or process (`gpulab:runtime: process`, e.g. STACK=sim), whose programs are the ones
# `make tools` built: no Docker preflight and no download; the engine finds the Kubernetes provider in ./bin and must
# never fetch one (docs/process-lab.md). Every make call reads it, before ./venv exists: sed reads the one top-level
# key (no stack file: docker) in a millisecond, where a Python start cost 30-90 ms a call; gpulab's loader validates
# the whole file right after (a test holds the two to the same answer for every stack file).
RUNTIME_KEY := ^[[:space:]]+["'\'']?gpulab:runtime["'\'']?[[:space:]]*:[[:space:]]*["'\'']?([A-Za-z]+)["'\'']?[[:space:]]*(\#.*)?$$
RUNTIME := $(or $(shell sed -nE '/$(RUNTIME_KEY)/{s//\1/p;q}' "Pulumi.$(STACK).yaml" 2>/dev/null),docker)
ifeq ($(RUNTIME),process)
TOOLS := process-tools
# --refresh: processes that died (killed by hand, a reboot) are found gone and made again, not kept in the state.
# The policy pack as an executable analyzer: the language host `make tools` builds (v3.79.0) cannot start it.
UP_OPTIONS := $() --refresh --policy-pack policies/analyzer
# A control plane whose processes stopped is started on its own data before the engine looks at it
# (process_lab/resume.py says why it cannot wait for pulumi up).
RESUME := $(PY) -m process_lab.resume
# A state that names process mode's providers by a path they left is rewritten to today's, once, before the engine
# loads them (process_lab/state_upgrade.py).
STATE_UPGRADE := $(PY) -m process_lab.state_upgrade
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION := true
else
TOOLS := prereqs
# The Docker lab's plugins are the releases its SDKs ask for, downloaded into Pulumi's plugin cache: a provider
# `make tools` left in ./bin (on PATH) must not stand in for them. (Process mode keeps PATH: a state written
# before its providers asked for 4.25.0 still names 4.34.2, and only PATH's provider can read it.)
export PULUMI_IGNORE_AMBIENT_PLUGINS := true
UP_OPTIONS := $() --policy-pack policies
RESUME := true
STATE_UPGRADE := true
endif
# A stack with a source cache (gpulab:sourceCache): the engine installs no plugin by itself, so a missing one is
# named at once instead of a download that cannot succeed.
# EVENT_LOG=file: the engine's events of `pulumi up` or `pulumi destroy` (each with its second) into that file, for
# benchmarks/lab_profile.py's per-step profile. The CLI has the flag only with PULUMI_DEBUG_COMMANDS=true.
EVENT_LOG_OPTION = $(if $(EVENT_LOG), --event-log "$(abspath $(EVENT_LOG))")
OFFLINE_ENV = $$($(PY) -m model.docker_lab.sources --stack "$(STACK)" >/dev/null 2>&1 && echo env PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true)

.PHONY: help up down plan verify report check test lint bench bench-scheduling prereqs policy-venv stack upstream-data clean deploy destroy \
	diagnose lab-exists lint-python stack-file tools test-real test-integration process-tools node-image lab-images cache

help:
	@echo "make up             preflight (Linux, Docker, tools, disk), then venv, pinned kind/kubectl/pulumi in ./bin, pulumi up"
	@echo "make plan           offline preview of STACK (default dev): validation, resources, outputs, policy verdicts"
	@echo "make verify         acceptance suite against the live lab; fails when there is none"
	@echo "make diagnose       why the lab is not ready: every cluster and tenant, a summary and reports/diagnose-*.tar.gz"
	@echo "make report         per-card GPU allocation of every tenant (and reports/allocation.png)"
	@echo "make check          TENANT=name FILES='a.yaml b.yaml' [LIVE=1]: do these manifests fit the tenant (now)?"
	@echo "make down           pulumi destroy; says so and exits 0 when nothing is deployed"
	@echo "make test           ruff + the unit tier: config, program under mocks, policies, engine; in-process"
	@echo "make test-integration  the lab's scripts, make targets and entry points run as processes against fakes of"
	@echo "                    Docker, kind and kubectl (no Docker); CI runs both"
	@echo "make test-real      the real Kubernetes programs (make tools; GPULAB_BIN=dir) judge the admission layer"
	@echo "                    and the CEL test double (tests/real); fails when the programs are missing"
	@echo "make upstream-data  get the upstream schemas/charts the tests validate against (sha256-checked); uses"
	@echo "                    GPULAB_UPSTREAM (or ../shared/upstream on gpulab's CI) when complete, else downloads what is missing"
	@echo "make tools          the real upstream programs (kube-apiserver, etcd, kwok, pulumi...) into ./bin: upstream's"
	@echo "                    release file where it downloads and matches its pinned checksum (tools/releases.toml),"
	@echo "                    else built from pinned Go modules (Go 1.26 and the module proxy; see tools/README.md)"
	@echo "make node-image     gpulab's node image without a registry: Debian packages (debootstrap of this machine's apt"
	@echo "                    sources) and make tools' kubelet/kubeadm/kubectl; needs root and Docker (docs/real-nodes.md)"
	@echo "make cache          fetch every chart, manifest, image, tool and plugin STACK takes from outside into its"
	@echo "                    gpulab:sourceCache (or CACHE=dir), checked; make up then downloads nothing (docs/offline.md)"
	@echo "make lab-images     the Docker lab's images of served programs without a registry: a kind node image (kubeadm's"
	@echo "                    images inside), MetalLB and gpulab's HAMi device plugin; needs root and Docker (docs/docker-lab.md)"
	@echo "make bench          benchmarks (program growth, policy checking, image pulls)"
	@echo "make bench-scheduling  HAMi against kube-scheduler alone (and DRA) on KWOK nodes, performance.md's rows (the"
	@echo "                    programs of make tools, GPULAB_HAMI_SCHEDULER_V2_10_0; an hour or more: docs/performance.md)"
	@echo "make lint           ruff and shellcheck only"
	@echo "make policy-venv    the policy pack's own venv (policies/venv), for pulumi preview --policy-pack policies"
	@echo "make clean          remove venv, policies/venv, bin, reports, caches but .cache/sources (never .state)"
	@echo "STACK=NAME picks another Pulumi.NAME.yaml (default dev)."
	@echo "STACK=sim           the reference lab as local processes (runtime: process): make up/down use the programs"
	@echo "                    of make tools, no Docker (HAMi: GPULAB_HAMI_SCHEDULER_V2_10_0; docs/process-lab.md)"

$(VENV)/.installed: requirements.txt requirements-dev.txt policies/requirements.txt
	@$(PYTHON_HOST) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "gpulab needs Python 3.11 or newer")'
	@echo "[gpulab] creating ./venv: about 80 packages, 0.8 GB (10-20 s measured; more on a slow network)" >&2
	$(PYTHON_HOST) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	@# uv shows what it resolves, downloads (a progress bar on a terminal) and installs.
	@# uv reads no pip configuration (an index mirror, certificates): if it fails, pip does the same install.
	$(VENV)/bin/uv pip install --python $(PY) -r requirements-dev.txt || { \
	  echo "[gpulab] uv could not install the venv (above); installing with pip instead (slower, quiet)" >&2; \
	  $(PY) -m pip install --quiet -r requirements-dev.txt; }
	@# The venv's python finds gpulab's packages from any directory (python -m policies check ...).
	$(PY) -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "gpulab.pth").write_text("$(CURDIR)\n")'
	touch $@

# The policy pack's own virtualenv, where the Pulumi CLI looks for it (policies/PulumiPolicy.yaml).
policies/venv/.installed: policies/requirements.txt
	@echo "[gpulab] creating policies/venv (pulumi-policy, pydantic, PyYAML)" >&2
	$(PYTHON_HOST) -m venv policies/venv
	policies/venv/bin/python -m pip install --quiet -r policies/requirements.txt
	touch $@

# The pinned CLIs into ./bin: kind only for a stack with a kind management cluster (or one preview cannot read).
# A failed download is named by prereqs.sh; the line after it says what to do.
prereqs: $(VENV)/.installed
	@tools=$$($(PY) -m preview --stack "$(STACK)" --validate 2>/dev/null) || tools="kind kubectl pulumi"; \
	case " $$tools " in *" kind "*) need_kind=yes ;; *) need_kind=no ;; esac; \
	cache=$$($(PY) -m model.docker_lab.sources --stack "$(STACK)" 2>/dev/null) || cache=""; \
	NEED_KIND=$$need_kind PYTHON=$(PY) STACK=$(STACK) SOURCE_CACHE=$$cache bash hack/prereqs.sh || { \
	  eval "$$($(PY) -m model.versions)"; \
	  echo "[gpulab] could not install the pinned kind $$KIND_VERSION, kubectl $$KUBECTL_VERSION and Pulumi CLI" \
	    "v$$PULUMI_VERSION into ./bin; the line above names what failed. Check that this host reaches github.com," \
	    "dl.k8s.io and get.pulumi.com (behind a proxy: export https_proxy), or put these versions on PATH;" \
	    "then run the same make command again" >&2; exit 1; }

policy-venv: policies/venv/.installed

# A new stack whose file holds an encryptionsalt made with another passphrase stops here; up_outcome.py says so.
stack: $(TOOLS)
	mkdir -p -m 700 .state
	@echo "pulumi stack select --create $(STACK)"
	@$(PYTHON_HOST) -m hack.up_outcome --setup $(STACK) pulumi stack select --create $(STACK)

# When the acceptance suite fails on a lab: one line pointing at make diagnose, and the step's own exit code
# (pulumi up's is hack/up_outcome.py's). Not before: a failed preflight, venv or download says itself what
# to do (nothing to diagnose).
DIAGNOSE_HINT = { rc=$$?; echo "[gpulab] $@ failed: \`make diagnose STACK=$(STACK)\` tells why (summary + reports/diagnose-*.tar.gz)" >&2; exit $$rc; }

# Is STACK one of the project's stacks? One message for every target that reads Pulumi.$(STACK).yaml, before
# anything is installed. Without a working $(PYTHON_HOST), preflight (up) or the venv (the others) says so.
stack-file:
	@if command -v $(PYTHON_HOST) >/dev/null; then $(PYTHON_HOST) -m model.stack_file "$(STACK)"; fi

# Input and host first: nothing is installed or created for a stack that does not exist or on a host that
# cannot run the lab. The stack file is validated with gpulab's own loader, which needs ./venv (created here
# if missing), before any CLI is downloaded.
up: stack-file
ifeq ($(RUNTIME),process)
	@$(MAKE) --no-print-directory --silent $(VENV)/.installed  # silent: no "is up to date" line
	@$(PY) -m preview --stack "$(STACK)" --validate >/dev/null
	@$(MAKE) --no-print-directory deploy
else
	@PYTHON_HOST=$(PYTHON_HOST) STACK=$(STACK) VENV=$(VENV) bash hack/preflight.sh
	@$(PYTHON_HOST) -m hack.secrets_check $(STACK)
	@$(MAKE) --no-print-directory --silent $(VENV)/.installed  # silent: no "is up to date" line
	@$(PY) -m preview --stack "$(STACK)" --validate >/dev/null
	@# With a source cache: everything the stack needs is in it (each missing item named), before any download.
	@if $(PY) -m model.docker_lab.sources --stack "$(STACK)" >/dev/null; then $(PY) -m hack.source_cache check --stack $(STACK); fi
	@$(MAKE) --no-print-directory deploy
endif

# Process mode's preflight: every program `pulumi up` will start is built (one line each if not).
process-tools: $(VENV)/.installed
	@$(PY) -m process_lab.preflight --stack $(STACK)

deploy: $(TOOLS) policy-venv stack
	@$(PYTHON_HOST) -m hack.secrets_check $(STACK)
	@$(PYTHON_HOST) -m hack.stack_lock $(STACK)
	@$(STATE_UPGRADE) $(STACK)
	@$(RESUME) $(STACK)
	@# A stack with a source cache: its Pulumi plugins from there, and the engine never downloads one.
	@$(PY) -m hack.source_cache plugins --stack $(STACK)
	@echo "pulumi up --yes --stack $(STACK)$(UP_OPTIONS)"
	@# Its output as it comes; a failure's last line fits it: a policy refusal, Ctrl-C, a wrong passphrase, or
	@# the diagnose hint. Ctrl-C reaches pulumi from the terminal itself (hack/up_outcome.py). Its TMPDIR is a
	@# private folder removed afterwards: the Kubernetes provider leaves a kubeconfig file there per provider.
	@$(OFFLINE_ENV) $(PYTHON_HOST) -m hack.up_outcome $(STACK) pulumi up --yes --stack $(STACK)$(UP_OPTIONS)$(EVENT_LOG_OPTION)

# Nothing deployed: say so, download nothing. Otherwise Docker must answer before pulumi destroy runs.
down:
	@$(PYTHON_HOST) -m hack.stack_state $(STACK) && $(MAKE) --no-print-directory destroy || [ $$? = 3 ]

# The secrets check reads the stack with ./venv's loader, so it runs once prereqs has made ./venv.
destroy:
ifeq ($(RUNTIME),process)
	@$(MAKE) --no-print-directory --silent $(VENV)/.installed  # silent: no "is up to date" line
	@$(PY) -m process_lab.preflight --destroy --stack $(STACK)
	@# A tenant's stopped programs first, on its data: a foreground deletion waits for its garbage collector.
	@$(RESUME) $(STACK)
else
	bash hack/preflight.sh --docker-only
	@$(MAKE) --no-print-directory prereqs
endif
	@$(PYTHON_HOST) -m hack.secrets_check $(STACK)
	@# --refresh first drops from the state what was deleted by hand: a worker container (the Docker provider
	@# stops a container before removing it and fails on one that is gone) and, through deleteUnreachable,
	@# the objects of a kind cluster or tenant that no longer answers.
	@$(PYTHON_HOST) -m hack.stack_lock $(STACK)
	@# After the lock's check: its import takes the stack's lock, which a killed pulumi may have left.
	@$(STATE_UPGRADE) $(STACK)
	@echo "pulumi destroy --yes --refresh --stack $(STACK)"
	@# With a private TMPDIR that goes with it: the Kubernetes provider leaves a kubeconfig file there per
	@# provider it configures (hack/up_outcome.py). pulumi keeps the terminal (--passthrough).
	@$(PYTHON_HOST) -m hack.up_outcome --passthrough $(STACK) pulumi destroy --yes --refresh --stack $(STACK)$(EVENT_LOG_OPTION)

# GNU make exits 2 whenever a recipe fails, so through make a policy refusal and an invalid stack both
# exit 2; the preview's last line (before make's own Error line) says which. Scripts that need the difference run the preview itself:
# `./venv/bin/python -m preview --stack NAME` exits 1 for a policy refusal and 2 for an invalid stack.
plan: stack-file $(VENV)/.installed
	@$(PY) -m hack.secrets_check $(STACK)
	$(PY) -m preview --stack $(STACK)

# A lab exists only after `make up`: without one, say so in one line before installing ./venv (0.8 GB).
lab-exists:
	@status=0; $(PYTHON_HOST) -m hack.stack_state $(STACK) 2>/dev/null || status=$$?; \
	if [ "$$status" = 3 ]; then \
	  echo "[gpulab] no lab: stack '$(STACK)' has nothing deployed in $${PULUMI_BACKEND_URL#file://}; run \`make up$(if $(filter-out dev,$(STACK)), STACK=$(STACK))\` first" >&2; \
	  exit 1; \
	fi

verify: stack-file lab-exists $(VENV)/.installed
	@$(PY) -m model.stack $(STACK) || $(DIAGNOSE_HINT)
	@GPULAB_ACCEPTANCE=1 GPULAB_STACK=$(STACK) $(PY) -m pytest tests/acceptance -m acceptance -o addopts="" -rs -v \
	  --junitxml=reports/acceptance.xml || $(DIAGNOSE_HINT)

# Every call bounded; exit 1 when something is not ready. DIAGNOSE_ARGS: e.g. --call-timeout 10.
diagnose: stack-file $(VENV)/.installed
	PYTHONDONTWRITEBYTECODE=1 $(PY) -m diagnose --stack $(STACK) $(DIAGNOSE_ARGS)

report: stack-file lab-exists $(VENV)/.installed
	GPULAB_STACK=$(STACK) $(PY) -m report --png reports/allocation.png

check: stack-file $(VENV)/.installed
	@test -n "$(TENANT)" -a -n "$(FILES)" || { echo "usage: make check TENANT=name FILES='a.yaml ...' [LIVE=1]" >&2; exit 2; }
	$(PY) -m policies check --tenant "$(TENANT)" --stack "$(STACK)" $(if $(LIVE),--live) $(FILES)

# Every shell script: the project's, and each fake whose first line asks for a shell (some fakes are Python).
lint: lint-python
	$(VENV)/bin/shellcheck scripts/*.sh hack/*.sh node-image/*.sh policies/analyzer \
		$$(find tests/fakes -type f -exec grep -lE '^#!(/usr/bin/env |/bin/)(ba)?sh' {} +)

lint-python: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The suite sees no make variables (tests run make as a user would). Its temporary files go under a short
# folder of its own: with a worker per core, pytest's default paths grow too long for a unix socket.
# Bytecode: the suites start some 200 Python processes (workers; diagnose, preview, the checker...). With
# PYTHONDONTWRITEBYTECODE=1 in the environment, and uv installing no .pyc, each one compiled its ~700
# modules again (2 CPU-s each); here they compile once into .cache/pycache, beside no source file.
PYCACHE := $(CURDIR)/.cache/pycache
# One tier of the offline suite: $(1) pytest's marker expression, $(2) its workers.
define run_tier
	@base=$$(mktemp -d "$${TMPDIR:-/tmp}/gpulab-test.XXXXXX"); trap 'rm -rf "$$base"' EXIT; \
	echo "pytest -m '$(1)' -n $(2) --dist worksteal --basetemp $$base"; \
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(PYCACHE) \
	  $(PY) -m pytest -m "$(1)" -n $(2) --dist worksteal --basetemp "$$base"
endef
# shellcheck runs in make test-integration, with the scripts' other tests (tests/scripts/test_scripts.py).
test: lint-python
	$(call run_tier,not integration,$(TEST_WORKERS))

# The integration tier: tests that run make, the lab's scripts, gpulab's entry points and pytest as processes, with
# fakes of Docker, kind, kubectl and the Pulumi CLI on PATH (tests/fakes). No Docker, no network.
test-integration: $(VENV)/.installed
	$(call run_tier,integration,$(INTEGRATION_WORKERS))

# The real tier (tests/real): kwokctl control planes of the programs in GPULAB_BIN (default ./bin, what
# `make tools` builds) judge the admission layer and the CEL double, and run the process lab's tenants.
# One pytest process, no workers: each control plane is started once.
# GPULAB_REAL=1: missing programs fail the run (under `make test` the tier skips with one line).
test-real: $(VENV)/.installed
	@base=$$(mktemp -d "$${TMPDIR:-/tmp}/gpulab-real.XXXXXX"); trap 'rm -rf "$$base"' EXIT; \
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(PYCACHE) GPULAB_REAL=1 \
	  $(PY) -m pytest tests/real -m real -p no:xdist -o addopts="" -rs --durations=5 --basetemp "$$base"

# The real programs, from the wrapper Go modules in tools/ (programs.toml): a second run builds nothing.
tools:
	@$(PYTHON_HOST) -m tools.build

# gpulab's node image (node-image/build.sh): kubelet, kubeadm, kubectl, gpulab-dra-plugin and gpulab-hami-plugin of make tools (unless
# GPULAB_BIN names another folder), an engine (hack/docker-engine.sh starts Debian's where none answers), then the image; a second
# run with nothing changed ends in seconds.
node-image:
	@if [ -z "$${GPULAB_BIN:-}" ]; then $(PYTHON_HOST) -m tools.build kubelet kubeadm kubectl gpulab-dra-plugin gpulab-hami-plugin; fi
	@bash hack/docker-engine.sh start
	@bash node-image/build.sh

# The Docker lab's source cache (hack/source_cache.py, docs/offline.md): every chart, manifest, image, tool and
# plugin STACK takes from outside, fetched once and checked, into the stack's gpulab:sourceCache (or CACHE=dir).
# The policy pack's venv too: after make cache, make up on this host needs nothing from PyPI either.
cache: $(VENV)/.installed policies/venv/.installed
	@$(PY) -m hack.source_cache fill --stack $(STACK) $(if $(CACHE),--dir "$(CACHE)")

# The Docker lab's images of programs the Go module proxy serves (node-image/lab-images.sh): a kind node image with
# kubeadm's images inside, and MetalLB's controller and speaker; and gpulab's HAMi device plugin as an image
# (node-image/hami-plugin-image.sh, for devicePlugin: gpulab tenants); their programs first (tools/programs.toml, group
# lab-images, and kubernetes' own, and gpulab-hami-plugin), unless GPULAB_BIN names a folder that has them.
lab-images:
	@if [ -z "$${GPULAB_BIN:-}" ]; then $(PYTHON_HOST) -m tools.build kube-apiserver kube-controller-manager \
	  kube-scheduler kube-proxy kubelet kubeadm kubectl gpulab-hami-plugin && \
	  $(PYTHON_HOST) -m tools.build --group lab-images; fi
	@bash hack/docker-engine.sh start
	@bash node-image/lab-images.sh
	@bash node-image/hami-plugin-image.sh

upstream-data:
	$(PYTHON_HOST) tests/support/upstream_data.py

# -u: each line as it is measured, not all of them at the end. The program benchmark borrows the tests' harness
# (tests/support/lab_harness.py): tests/support on its path, as pytest puts it.
bench: $(VENV)/.installed
	@echo "[gpulab] bench 1/3: the program under mocks for 2, 10 and 50 tenants" >&2
	PYTHONPATH=tests/support$${PYTHONPATH:+:$$PYTHONPATH} $(PY) -u -m benchmarks.program_under_mocks
	@echo "[gpulab] bench 2/3: policy checking, today's code against the baseline commit" >&2
	$(PY) -u -m benchmarks.policy_check
	@echo "[gpulab] bench 3/3: registry pulls with and without pre-loading" >&2
	$(PY) -u -m benchmarks.image_pulls

# Real control planes and HAMi (not part of make bench: it needs make tools and a HAMi binary, and takes an hour or
# more, the chart's rows running to their deadline). Each row: HAMi at the chart's and the lab's setting, and
# kube-scheduler alone at its own client rate and unthrottled.
bench-scheduling: $(VENV)/.installed
	$(PY) -u -m benchmarks.hami_scheduling --rows goal --settings chart lab ceiling ceiling-unthrottled dra

# .cache/sources stays: a source cache (make cache) may have been filled on another machine.
clean:
	rm -rf $(VENV) policies/venv bin reports .pytest_cache .ruff_cache .hypothesis
	if [ -d .cache ]; then find .cache -mindepth 1 -maxdepth 1 ! -name sources -exec rm -rf {} +; fi
