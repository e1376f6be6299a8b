# Two commands on a fresh machine (see README): `make demo` and `make test`.
# Everything they need is installed here, into ./.venv, from the package registries.
# `make demo` installs mindwatch and its MindSpore extra only; `make test` adds the
# development extras on top. Each has its own stamp, so either order installs once.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
DEV_STAMP  := $(VENV)/.installed-dev
export GLOG_v ?= 3

.PHONY: demo test lint typecheck importlint docs pytest bench clean sysdeps messages mutation \
	planted

# Debian packages the tests drive for real: headless Chromium opens the HTML report and
# takes screenshots of pages (chromium-driver is its WebDriver), pdftoppm (poppler-utils)
# renders the PDF report, a Prometheus server (prometheus; promtool checks and unit-tests
# the shipped alert rules) scrapes the exporters, and prometheus-pushgateway receives a
# short job's push. Installed with apt-get when missing, as root or with passwordless
# sudo; otherwise, or with `make test SYSDEPS=skip`, nothing is installed and the tests
# that need them are reported as skipped. Under CI (the CI variable set and not false;
# .ci/run sets it) a package that cannot be installed fails `make test` here, naming it,
# and a skipped test fails the run (tests/ci_skips.py): CI never passes with tests unrun.
SYSDEPS ?= auto
SYSDEPS_PKGS := chromium chromium-driver poppler-utils prometheus prometheus-pushgateway
SYSDEPS_BIN  := chromium chromedriver pdftoppm prometheus promtool prometheus-pushgateway

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade --quiet pip

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[mindspore]"
	touch $(DEMO_STAMP)

# The dev extras include everything the demo needs: its stamp is touched too.
$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev,mindspore]"
	touch $(DEV_STAMP) $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/mindwatch demo

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests benchmarks examples docs scripts
	$(BIN)/ruff format --check src tests benchmarks examples docs scripts

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

importlint: $(DEV_STAMP)
	$(BIN)/lint-imports

sysdeps:
	@missing=; for b in $(SYSDEPS_BIN); do command -v $$b >/dev/null || missing=1; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	skip="make test: not installing $(SYSDEPS_PKGS)"; \
	then_="the browser, PDF and Prometheus tests will be reported as SKIPPED"; \
	case "$$(echo "$${CI:-}" | tr A-Z a-z)" in ""|0|false|no|off) ci=;; *) ci=1;; esac; \
	if [ -n "$$ci" ]; then \
	  skip="make test: under CI=$$CI every test must run, but $(SYSDEPS_PKGS) cannot be installed"; \
	  then_="install them first, or run as root or with passwordless sudo"; fi; \
	fail() { echo "$$skip ($$1): $$then_."; [ -z "$$ci" ]; }; \
	if [ "$(SYSDEPS)" = skip ]; then fail "SYSDEPS=skip"; exit; fi; \
	if [ "$$(id -u)" = 0 ]; then sudo=; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo=sudo; \
	else fail "neither root nor passwordless sudo"; exit; fi; \
	if ! command -v apt-get >/dev/null; then fail "no apt-get here"; exit; fi; \
	echo "make test: installing $(SYSDEPS_PKGS) with apt-get (skip with SYSDEPS=skip)"; \
	$$sudo apt-get update -q && \
	DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends \
	  $(SYSDEPS_PKGS)

# The documentation site (mkdocs.yml): strict, so a broken link or anchor, a page left
# out of the nav or any other warning fails it; `make test` builds it too. The HTML lands
# in site/ (site/index.html, and site/zh/index.html in Chinese).
docs: $(DEV_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build

# pytest on PYTEST_WORKERS processes (pytest-xdist; docs/install.md, "How the suite runs"):
# the tests that share a job stay on one worker and the longest start first
# (tests/schedule.py). PYTEST_WORKERS=0 runs them all in this one process.
# Bytecode caches are written for src/ and tests/ even where the environment sets
# PYTHONDONTWRITEBYTECODE (this project's machines do): otherwise each of the suite's
# hundreds of Python processes (msrun workers, CLI runs) compiles mindwatch again, each
# MindFormers training process compiles MindSpore and MindFormers (uv installs their venv
# without bytecode; tests/mindformers/conftest.py), and each xdist worker rewrites every
# test module's asserts. __pycache__/ is ignored by git.
PYTEST_WORKERS ?= 4
pytest: export PYTHONDONTWRITEBYTECODE :=
pytest: $(DEV_STAMP) sysdeps
	$(BIN)/python -m pytest -ra -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

test: lint typecheck importlint docs pytest

# Message catalogues (docs/dev/translations.md): collect every _("...") / N_("...") of
# the package into the template, merge it into each language's .po (new messages come
# out untranslated, changed ones fuzzy: tests/common/test_i18n.py fails until they are
# translated), and compile the .po files to the .mo files gettext reads.
LOCALE := src/mindwatch/locale
messages: $(DEV_STAMP)
	$(BIN)/pybabel extract -F babel.cfg -o $(LOCALE)/mindwatch.pot -w 100 \
	  --project=mindwatch --copyright-holder="mindwatch developers" .
	$(BIN)/pybabel update -i $(LOCALE)/mindwatch.pot -d $(LOCALE) -D mindwatch -w 100
	$(BIN)/pybabel compile -d $(LOCALE) -D mindwatch --statistics

# Benchmarks compare against torch's SummaryWriter too; torch is only needed here.
bench: $(DEV_STAMP)
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	$(BIN)/python benchmarks/write.py
	$(BIN)/python benchmarks/overhead.py
	$(BIN)/python benchmarks/aggregate.py
	$(BIN)/python benchmarks/read.py
	$(BIN)/python benchmarks/report.py
	$(BIN)/python benchmarks/rules.py

# Mutation testing (docs/development.md, "Mutation testing"): each module of
# [tool.mindwatch.mutation] in pyproject.toml is mutated by mutmut and its mutants run
# against that module's own tests; exits 1 when a module's share of killed mutants is below
# its floor. Not part of `make test` (hours on two cores). One module: `make mutation
# MODULES=rules`; the survivors and their diffs land in build/mutation/<module>/.
MODULES ?=
mutation: $(DEV_STAMP)
	$(BIN)/python -m pip install --quiet -e ".[mutation]"
	$(BIN)/pybabel compile -d $(LOCALE) -D mindwatch
	$(BIN)/python scripts/mutation.py $(MODULES)

# Planted bugs (docs/development.md, "Planted bugs of issue 38"): the realistic bugs issue
# 38 found the suite letting through, and more of their kind, planted one at a time in
# src/mindwatch; each must fail the tests named beside it, and every planted file is
# written back byte for byte. Exits 1 when a bug escapes. About a minute on two cores; not
# part of `make test`. Some bugs only: `make planted BUGS="merge-fold movers-std"`.
BUGS ?=
planted: $(DEV_STAMP)
	$(BIN)/pybabel compile -d $(LOCALE) -D mindwatch
	$(BIN)/python scripts/planted_bugs.py $(if $(BUGS),--only $(BUGS))

clean:
	rm -rf $(VENV) .venv-mindformers .mypy_cache .ruff_cache .pytest_cache .hypothesis build/mutation \
	  build/planted
