# Two commands on a fresh machine (see README): `make demo` and `make test`.
# Everything they need is installed here, into ./.venv, from the package registries.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export GLOG_v ?= 3

.PHONY: demo test lint typecheck importlint pytest bench clean sysdeps

# Debian packages the tests drive for real: headless Chromium opens the HTML report,
# pdftoppm renders the PDF. Installed with apt-get when missing (root or sudo).
SYSDEPS_BIN := /usr/bin/chromium /usr/bin/pdftoppm
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade --quiet pip
	$(BIN)/python -m pip install --quiet -e ".[dev,mindspore]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/mindwatch demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy

importlint: $(STAMP)
	$(BIN)/lint-imports

sysdeps:
	@for f in $(SYSDEPS_BIN); do test -x $$f || missing=1; done; \
	if [ -n "$$missing" ]; then \
	  $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q \
	    chromium chromium-driver poppler-utils; \
	fi

pytest: $(STAMP) sysdeps
	$(BIN)/python -m pytest -ra $(PYTEST_ARGS)

test: lint typecheck importlint pytest

# Benchmarks compare against torch's SummaryWriter too; torch is only needed here.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	$(BIN)/python benchmarks/write.py
	$(BIN)/python benchmarks/overhead.py
	$(BIN)/python benchmarks/aggregate.py
	$(BIN)/python benchmarks/read.py
	$(BIN)/python benchmarks/report.py
	$(BIN)/python benchmarks/rules.py

clean:
	rm -rf $(VENV) .venv-mindformers .mypy_cache .ruff_cache .pytest_cache .hypothesis
