# Two commands on a fresh machine: `make run` (the cockpit, embedded cluster) and `make test`.
# Both create .venv when it is missing; the stamp makes the second call instant.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PIP    := $(BIN)/python -m pip --disable-pip-version-check

.PHONY: run test test-e2e bench clean-venv image-lock

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# torch first: the pinned CPU wheel on disk, so no dependency can pull a CUDA build
	$(PIP) install -q torch==2.13.0 2>&1 | grep -v "is ignored: it is neither" || true
	$(PIP) install -q -e '.[dev]' 2>&1 | grep -v "is ignored: it is neither" || true
	$(BIN)/python -c "import torch, textual, kfp, ray, kubernetes, pytest"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/kfcockpit $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Opt-in: a real cluster. KFCOCKPIT_E2E_CONTEXT=kind-kind [KFCOCKPIT_E2E_KFP_HOST=URL] make test-e2e
# (every test marked e2e: the lesson on Kubernetes and the pipelines on its Pipelines endpoint)
test-e2e: $(STAMP)
	$(BIN)/python -m pytest -m e2e tests $(PYTEST_ARGS)

# The pinned base image's lock (manifests/image/requirements.lock), from the venv's installed
# dependencies; rerun after changing pyproject.toml's dependencies.
image-lock: $(STAMP)
	$(BIN)/python -m backend.pipelines.image_lock

bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean-venv:
	rm -rf $(VENV)
