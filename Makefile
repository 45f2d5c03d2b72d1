# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest browser bench clean

$(STAMP): pyproject.toml constraints.txt setup.py store/sqlite/bm25_top.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/stenographer demo

lint: $(STAMP)
	$(PY) -m ruff check stenographer graphs nodes store constants tests bench examples

typecheck: $(STAMP)
	$(PY) -m mypy

# Debian's Chromium for the browser tests (apt-get as root; Playwright's own browser
# download does not work offline). Never fails: the browser tests skip with the reason.
browser: $(STAMP)
	$(PY) -m tests.browser_setup

pytest: $(STAMP) browser
	$(PY) -m pytest -q

test: lint typecheck pytest

bench: $(STAMP)
	$(PY) bench/ingest_query.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache store/sqlite/*.so
