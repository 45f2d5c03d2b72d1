"""The SQLite dialect: what the store does differently on its default backend, a file
with FTS5 and sqlite-vec (``store.sqlite.dialect``)."""

from __future__ import annotations

import functools
import importlib.util
import sys

__all__ = ["bm25_top_path"]


@functools.cache
def bm25_top_path() -> str | None:
    """The keyword search's ranking function (``store/sqlite/bm25_top.c``, built with the
    package): its shared library beside this package's sources, found without importing
    it (it is SQLite's extension, not a Python module). None where the install could not
    build it (no C compiler or no SQLite headers): keyword search then ranks with FTS5's
    bm25() (``store.sqlite.search.keyword_sql``), the same hits and scores, and the
    process says so once on stderr."""
    spec = importlib.util.find_spec("store.sqlite.bm25_top")
    if spec is None or spec.origin is None:
        print("stenographer: store/sqlite/bm25_top.c is not built: keyword search ranks "
              "with FTS5's bm25(), slower on large stores; reinstall (make "
              ".venv/.installed, or pip install -e .) with a C compiler and SQLite's "
              "headers (Debian: gcc libsqlite3-dev)", file=sys.stderr)
        return None
    return spec.origin
