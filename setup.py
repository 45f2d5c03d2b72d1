"""The one compiled part: FTS5's bm25() for the best k rows of a statement
(store/sqlite/bm25_top.c), a SQLite loadable extension that store.db loads into every
connection. Built against SQLite's extension headers (Debian: libsqlite3-dev); the rest
of the configuration is pyproject.toml's."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("store.sqlite.bm25_top", ["store/sqlite/bm25_top.c"],
                             libraries=["m"])])
