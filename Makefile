# mptlab: the two commands a researcher needs are `make experiment NAME=...`
# and `make test`; everything they depend on is installed on first use.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

NAME ?=
ARGS ?=

.PHONY: help deps docker-deps slurm-deps docker venv kernel modules experiment test test-unit test-kernel lint format bench clean

help:
	@echo "make experiment NAME=<name> [ARGS='--reps 5 --quick']   run a named experiment"
	@echo "make test                                             all tests (boots the kernel)"
	@echo "make kernel                                           build the UML kernel + modules (cached)"
	@echo "make docker                                           the Docker image 'mptlab' (docs/deployment.md)"
	@echo "make bench                                            benchmarks -> docs/benchmarks.md"
	@echo "make lint                                             ruff, mypy, checkpatch"
	@echo "make nightly [NIGHTLY='a b'] [NIGHTLY_HOOK=cmd]        one night of regression runs + trend pages"
	@echo "make nightly-timer                                    install + start the systemd timer for it"

deps:
	@scripts/install-deps.sh

docker-deps:
	@scripts/install-deps.sh docker

slurm-deps:
	@scripts/install-deps.sh slurm

# The image, from a debootstrapped Debian 12 and the cached kernel
# (scripts/docker-build.sh; needs a running engine: dockerd or systemctl).
DOCKER_TAG ?= mptlab
docker: venv docker-deps
	@scripts/docker-build.sh $(DOCKER_TAG)

$(STAMP): pyproject.toml
	@scripts/install-deps.sh runtime
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]' --config-settings editable_mode=compat
	@# Debian's mininet package, for Mininet topologies (mptlab.spec.mininet): only it
	@site=$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
	  if [ -d /usr/lib/python3/dist-packages/mininet ] && [ ! -e "$$site/mininet" ]; then \
	    ln -s /usr/lib/python3/dist-packages/mininet "$$site/mininet"; fi
	@touch $@

venv: $(STAMP)

kernel:
	@kernel/build.sh

modules:
	@kernel/build.sh --modules

experiment: venv kernel
	@if [ -z "$(NAME)" ]; then echo "usage: make experiment NAME=<name>  (see: $(VENV)/bin/mptlab list)"; exit 2; fi
	$(VENV)/bin/mptlab run $(NAME) $(ARGS)

# docker-deps: the `docker` tests build and run the image (tests/test_docker.py)
test: venv kernel docker-deps slurm-deps
	$(PY) -m pytest $(ARGS)

test-unit: venv
	$(PY) -m pytest -m "not kernel and not docker" $(ARGS)

test-kernel: venv kernel
	$(PY) -m pytest -m kernel $(ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	@kernel/checkpatch.sh

format: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: venv kernel
	$(PY) -m bench.run $(ARGS)

# Nightly regression runs: run the set NIGHTLY, compare each experiment with
# its accepted baseline and the previous night under results/nightly/ (rules:
# compare-rules.yaml), keep the history, write the trend pages
# (results/nightly/site/index.html); NIGHTLY_HOOK runs when a night regressed
# (the findings on its stdin).  The first night becomes the baseline; accept
# a later one with
#   .venv/bin/mptlab nightly --accept [STAMP]
# `make nightly-timer` installs a systemd timer that runs this every night
# (docs/deployment.md, "Nightly regression runs").
NIGHTLY ?= blest-3g-wlan
NIGHTLY_ARGS ?= --reps 5 --quick --jobs 2 --publish
NIGHTLY_HOOK ?=
.PHONY: nightly nightly-timer
nightly: venv kernel
	$(VENV)/bin/mptlab nightly $(NIGHTLY) $(NIGHTLY_ARGS) $(if $(NIGHTLY_HOOK),--on-regression "$$NIGHTLY_HOOK")

nightly-timer:
	@scripts/install-nightly-timer.sh

clean:
	rm -rf build .pytest_cache
