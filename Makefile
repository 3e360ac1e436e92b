# richlazy — set-up, tests and the figure pipeline.
# `make demo` and `make test` work on a fresh machine: both install first.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RICHLAZY := $(BIN)/richlazy
JOBS   ?= 2

.PHONY: install demo test test-slow lint bench clean help

help:
	@echo "make install   create .venv and install richlazy (editable, all extras)"
	@echo "make demo      install, then run the demo sweeps and report"
	@echo "make test      install, then run the test suite"
	@echo "make lint      ruff"
	@echo "make bench     run the benchmark scripts in bench/"

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dask,dev]'
	touch $(STAMP)

demo: install
	$(BIN)/python -m richlazy_cli.demo

test: install
	$(BIN)/python -m pytest -q

test-slow: install
	$(BIN)/python -m pytest -q -m slow

lint: install
	$(BIN)/ruff check richlazy_cli tests bench

bench: install
	for f in bench/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) results/*.h5 reports
