"""The one compiled part: FTS5's bm25() for the best k rows of a statement
(store/sqlite/bm25_top.c), a SQLite loadable extension that store.db loads into every
connection. Built against SQLite's extension headers (Debian: libsqlite3-dev). Optional:
where it cannot be built, the install goes on and keyword search ranks with FTS5's own
bm25(), the same hits and scores at more CPU (``store.sqlite.bm25_top_path``). The rest of
the configuration is pyproject.toml's."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("store.sqlite.bm25_top", ["store/sqlite/bm25_top.c"],
                             libraries=["m"], optional=True)])
