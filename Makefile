# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest browser bench clean

# SQLite's headers for the compiled ranking function (setup.py), installed with apt-get
# when missing and run as root on Debian; without them the install goes on and keyword
# search ranks with FTS5's own bm25().
$(STAMP): pyproject.toml constraints.txt setup.py store/sqlite/bm25_top.c
	@test -f /usr/include/sqlite3ext.h || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null \
	  || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libsqlite3-dev >/dev/null 2>&1 \
	  || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libsqlite3-dev; } >/dev/null 2>&1 \
	  || echo "SQLite's headers could not be installed: keyword search will rank with bm25()"
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

# Two worker processes (pytest-xdist), each given whole files so that a module's shared
# servers start once: much of the suite waits on subprocesses and servers, and a single
# process left a 2-core machine's second core mostly idle.
pytest: $(STAMP) browser
	$(PY) -m pytest -q --numprocesses 2 --dist loadfile

test: lint typecheck pytest

bench: $(STAMP)
	$(PY) bench/ingest_query.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache store/sqlite/*.so
