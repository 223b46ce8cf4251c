# Two commands on a fresh machine: `make report` and `make test`. Both bootstrap .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# GPU=0 opts out of CuPy; otherwise .ci/gpu-detect.sh picks the wheel for the driver's CUDA major version
# (printing one "GPU: ..." line) and the choice is part of the venv's key, so a rebuild keeps it.
GPU    ?= 1
GPU_REQ := $(shell GPU='$(GPU)' sh .ci/gpu-detect.sh)
export HARNESS_GPU := $(if $(filter 0,$(GPU)),0,)
# The stamp is keyed on pyproject.toml, constraints.txt and the GPU choice: change any and the venv is rebuilt.
KEY    := $(shell (cat pyproject.toml constraints.txt; echo "gpu=$(GPU_REQ)") | sha256sum | cut -c1-16)
STAMP  := $(VENV)/.stamp-$(KEY)
# Python's bytecode caches go under the venv (PYTHONPYCACHEPREFIX) and are written even where the environment
# sets PYTHONDONTWRITEBYTECODE: otherwise every process of a run (each command, each worker's start-up)
# recompiles the harness's modules from source, and the source tree still gets no __pycache__ folders.
export PYTHONDONTWRITEBYTECODE :=
export PYTHONPYCACHEPREFIX := $(CURDIR)/$(VENV)/pycache
# Two xdist workers by default (the suites are independent; a CI runner with more cores can say -n auto).
PYTEST_ARGS ?= -n 2
REPORT_ARGS ?=
# e.g. BENCH_ARGS="--sections overhead --out DIR": one section of the bench, in this file's environment
BENCH_ARGS ?=

.PHONY: report test lint gate bench audit env clean venv mutants

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# chainer 7.8.1 is an sdist whose setup.py imports pkg_resources: build it with this venv's
	# setuptools<70 and no build isolation, so newer pip/setuptools releases cannot break the build.
	$(BIN)/python -m pip install -q -c constraints.txt 'setuptools<70' wheel
	$(BIN)/python -m pip install -q -c constraints.txt --no-build-isolation -e '.[dev]'
	# espnet's wheel requires torch and dozens of audio packages; the harness imports only
	# espnet.nets.chainer_backend.deterministic_embed_id (chainer + numpy), so install it alone.
	$(BIN)/python -m pip install -q -c constraints.txt --no-deps espnet==202511
	$(if $(GPU_REQ),$(BIN)/python -m pip install -q -c constraints.txt '$(GPU_REQ)',@echo "no CuPy: CPU only")
	$(BIN)/python -m harness env --check
	touch $(STAMP)

report: $(STAMP)
	$(BIN)/python -m harness report $(REPORT_ARGS)

# The whole gate (ci profile) plus the unit tests; HARNESS_PROFILE=dev|audit for more examples.
# Benches, long campaigns and the end-to-end tests that take seconds of whole process trees (marker `slow`)
# are left out; `make test MARKS=` runs them too, as CI (.ci/run) does.
MARKS ?= not slow
test: lint
	HARNESS_PROFILE=$${HARNESS_PROFILE:-ci} $(BIN)/python -m pytest -p no:cacheprovider -m '$(MARKS)' $(PYTEST_ARGS)

# The static checks (configured in pyproject.toml): ruff (pyflakes, import order) over the code and the tests,
# mypy over harness/ (strict on core/ and judge/). `make test` runs them first.
lint: $(STAMP)
	$(BIN)/ruff check harness suites tools conftest.py
	$(BIN)/mypy

gate: $(STAMP)
	$(BIN)/python -m harness gate

# The bench lives beside the harness (tools/bench/); nothing in harness/ imports it.
bench: $(STAMP)
	$(BIN)/python -m tools.bench $(BENCH_ARGS)

# The mutation check of the gate (tools/mutants/): realistic regressions of the subjects, plugged in one at a
# time; writes reports/mutants/mutants.{csv,md}. Not part of `make test`.
mutants: $(STAMP)
	$(BIN)/python -m tools.mutants

audit: $(STAMP)
	$(BIN)/python -m harness audit --out reports/audit-$$(hostname).json

env: $(STAMP)
	$(BIN)/python -m harness env

clean:
	rm -rf $(VENV) reports/*/ reports/latest .hypothesis .pytest_cache build *.egg-info
