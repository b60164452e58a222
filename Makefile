# Two commands on a fresh machine: `make run` (the cockpit, embedded cluster) and `make test`.
# Both create .venv when it is missing; the stamp makes the second call instant.

# The interpreter that creates .venv: PYTHON=... wins; else the first of these that runs, on PATH
# or in pyenv. 3.11 first: the pinned CPU torch wheel on this machine's disk is built for 3.11, and
# elsewhere torch comes from the registry. A pyenv shim exists for every version pyenv knows but
# fails for one not selected, so each candidate is run, not just looked up. Expanded only when
# .venv is built, so `make run` stays instant.
SUPPORTED := 3.11 3.12 3.13
PYTHON ?= $(shell for v in $(SUPPORTED); do \
    for p in "$$(command -v python$$v)" $$(ls -d "$$(pyenv root 2>/dev/null || echo $$HOME/.pyenv)"/versions/$$v.*/bin/python$$v 2>/dev/null | sort -V -r); do \
      [ -n "$$p" ] && "$$p" -c '' 2>/dev/null && { echo "$$p"; exit 0; }; \
    done; done)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PIP    := $(BIN)/python -m pip --disable-pip-version-check

.PHONY: run test check flaky test-e2e bench clean-venv lock image-lock

# A bare venv of a supported Python.
$(BIN)/python:
	@test -n "$(PYTHON)" || { echo "make: no Python 3.11, 3.12 or 3.13 found on PATH or in pyenv: install one, or name it with PYTHON=/path/to/python3.x"; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' \
	  || { echo "make: $(PYTHON) is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'); kfcockpit supports 3.11, 3.12 and 3.13"; exit 1; }
	$(PYTHON) -m venv $(VENV)

# The venv holds requirements.lock exactly (backend/lockfile.py): checked against pyproject.toml
# first (one line naming what no longer fits, and `make lock`), torch then uv by pip, the rest by uv
# with nothing resolved, and checked again once installed. Upgrading is `make lock`.
$(STAMP): pyproject.toml requirements.lock | $(BIN)/python
	@$(BIN)/python -m backend.lockfile sync
	@$(BIN)/python -m backend.lockfile verify
	$(BIN)/python -c "import torch, textual, kfp, ray, kubernetes, pytest"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/kfcockpit $(ARGS)

# The layers and lint rules first (pyproject.toml: [tool.importlinter], [tool.ruff]; seconds),
# then the suite, which prints its slowest tests. Four pytest-xdist workers on two cores: a test is
# mostly real processes starting up and waiting on each other (Ray, node-loss grace periods, paced
# steps), and more workers fill more of those waits. Fresh-clone runs here: two workers kept the
# cores 72% busy (1,148 CPU seconds in 794 s), three 89% (1,072 in 606 s), four 92% (1,075 in 585 s).
# `make test PYTEST_ARGS=--cpu-time` measures it. tests/conftest.py keeps tests that share a fixture
# on one worker and hands out the longest groups first (--no-loadscope-reorder: xdist's own order,
# by test count, left the lesson walk for last and one worker idle at the end). TEST_WORKERS=0: one
# process.
# Bytecode is written while testing, whatever PYTHONDONTWRITEBYTECODE says outside: each xdist
# worker, controller and Ray driver is a fresh Python that would otherwise compile the project's
# modules (and pytest rewrite every test module's asserts) from source each time.
TEST_WORKERS ?= 4
TEST_ENV := PYTHONDONTWRITEBYTECODE=
test: $(STAMP)
	$(BIN)/lint-imports --no-cache
	$(BIN)/ruff check .
	$(TEST_ENV) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=15 $(PYTEST_ARGS)

# The developer's fast loop: the same layers and lint rules, then the tests that start no real
# process (tests/conftest.py: IN_PROCESS), about 40 s here. `make test` stays the whole suite.
# These tests only compute: a worker per core and one more (each worker collects the suite first).
CHECK_WORKERS ?= 3
check: $(STAMP)
	$(BIN)/lint-imports --no-cache
	$(BIN)/ruff check .
	$(TEST_ENV) $(BIN)/python -m pytest -n $(CHECK_WORKERS) --in-process -q -p no:cacheprovider $(PYTEST_ARGS)

# Catching a test that fails at random: rerun TESTS (files, directories or node ids) N times, each
# run a fresh pytest process (session fixtures such as an embedded cluster or a Ray run are made
# again), and report every test that ever failed with its count, e.g. `failed 3/20`
# (tests/flaky.py). On a shared machine: nice -n 10 make flaky TESTS="tests/local" N=5
N ?= 20
flaky: $(STAMP)
	$(BIN)/python -m tests.flaky --runs $(N) $(TESTS) -- $(PYTEST_ARGS)

# Opt-in: a real cluster. KFCOCKPIT_E2E_CONTEXT=kind-kind [KFCOCKPIT_E2E_KFP_HOST=URL] make test-e2e
# (every test marked e2e: the lesson on Kubernetes and the pipelines on its Pipelines endpoint)
test-e2e: $(STAMP)
	$(BIN)/python -m pytest -m e2e tests $(PYTEST_ARGS)

# Upgrading, deliberately: re-resolve pyproject.toml's ranges against the registry into
# requirements.lock, install it, and regenerate the pinned images' locks from it (their CUDA part
# needs the registry too). Commit the diff; `make test` then proves it.
lock: | $(BIN)/python
	$(BIN)/python -m backend.lockfile relock
	$(MAKE) $(STAMP)
	$(BIN)/python -m backend.pipelines.image_lock

# The pinned base images' locks alone, from the venv (which holds requirements.lock):
# manifests/image/requirements.lock and its CUDA variant manifests/image-cuda/requirements.lock
# (torch's CUDA build resolved by pip: needs the registry).
image-lock: $(STAMP)
	$(BIN)/python -m backend.pipelines.image_lock

bench: $(STAMP)
	for b in bench/[!_]*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean-venv:
	rm -rf $(VENV)
