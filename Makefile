# Two entry points: `make run` (the main job) and `make test` (the test suite).
# Each creates its own virtual environment in .venv with the pinned versions of constraints.txt.
# `make docs` builds the documentation site into build/site (strict), `make docs-serve` serves it.
# `make dist` builds the wheel and the sdist into dist/ and checks them with twine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: run test install bench docs docs-serve dist clean

$(BIN)/torchstream: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt torch==2.13.0
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[test,docs,release]"
	touch $(BIN)/torchstream

install: $(BIN)/torchstream

run: install
	$(BIN)/torchstream run $(ARGS)

test: install
	$(BIN)/python -m pytest

docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

dist: install
	$(BIN)/python -m build --outdir dist .
	$(BIN)/python -m twine check --strict dist/*

bench: install
	$(BIN)/python scripts/bench_learners.py

clean:
	rm -rf $(VENV) runs dist
