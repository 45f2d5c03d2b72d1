"""One PostgreSQL connection behind the interface the store modules use on SQLite.

The store's statements are written with SQLite's ``?`` and ``?N`` parameters; this
wrapper rewrites them once per statement text into psycopg's ``%s`` (numbered
parameters are expanded in order of appearance) and remembers the row count of the
last statement for ``changes()``, as ``apsw.Connection.changes`` does.

A transaction's BEGIN waits for its first statement and goes to the server in the same
message (``begin_with_first``): a round trip less for every transaction, which on a
busy machine costs a wait for the server's turn on a core each.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any, cast

import psycopg

from store.dialect import Dialect
from store.postgres.dialect import POSTGRESQL
from store.postgres.keywords import DerivedKeywords

__all__ = ["PgConnection", "translate"]

# A quoted literal or identifier (copied as is), a parameter (?, ?N, :name; not a ::cast)
# or a % to escape.
_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\?(\d*)|(?<!:):([A-Za-z_]\w*)|::|%")


_RETURNING = re.compile(r"\bRETURNING\b", re.IGNORECASE)


@lru_cache(maxsize=1024)
def translate(sql: str) -> tuple[str, tuple[int, ...] | None]:
    """``sql`` with psycopg placeholders, and the order in which numbered parameters
    are passed (None: plain ``?`` parameters, passed as given)."""
    order: list[int] = []
    numbered = False

    def swap(match: re.Match[str]) -> str:
        nonlocal numbered
        text = match.group(0)
        if text == "%":
            return "%%"
        if match.group(2):
            return f"%({match.group(2)})s"
        if not text.startswith("?"):
            return text.replace("%", "%%")
        if match.group(1):
            numbered = True
            order.append(int(match.group(1)) - 1)
        return "%s"

    out = _TOKEN.sub(swap, sql)
    return out, (tuple(order) if numbered else None)


class PgConnection:
    """A psycopg connection with ``execute``/``changes`` in the store's SQLite style."""

    dialect: Dialect = POSTGRESQL

    def __init__(self, raw: psycopg.Connection[Any],
                 keywords: DerivedKeywords | None = None) -> None:
        self.keywords = keywords  # the store's derived keyword index (store-wide searches)
        self._raw = raw
        self._changes = 0
        self._begin: str | None = None  # a BEGIN not yet sent (begin_with_first)

    def begin_with_first(self, begin: str) -> None:
        """Open a transaction with ``begin``, sent with the first statement."""
        self._begin = begin

    @property
    def begun(self) -> bool:
        """Whether a transaction was opened on the server (False: its BEGIN is still
        waiting for a first statement, so there is nothing to commit or roll back)."""
        return self._begin is None

    @property
    def raw(self) -> psycopg.Connection[Any]:
        """The psycopg connection, its transaction begun."""
        if self._begin is not None:
            begin, self._begin = self._begin, None
            self._raw.execute(begin.encode())
        return self._raw

    @property
    def database(self) -> str:
        """Which database: host, port and name (a key for what is cached per store)."""
        info = self._raw.info
        return f"{info.host}:{info.port}/{info.dbname}"

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        text, args = sql, None
        if params:
            text, order = translate(sql)
            args = params if order is None or isinstance(params, Mapping) \
                else [params[i] for i in order]
        if self._begin is not None:  # one message: BEGIN; the statement
            raw, begin, self._begin = self._raw, self._begin, None
            if args is not None:
                with raw.cursor() as cur:
                    text = cast("psycopg.ClientCursor[Any]", cur).mogrify(text, args)
            cur = raw.execute(f"{begin};\n{text}".encode())
            cur.nextset()  # the statement's own result
        elif args is None:  # no parameters: sent as written (may hold several statements)
            cur = self._raw.execute(text.encode())
        else:
            cur = self._raw.execute(text, args)
        self._changes = max(cur.rowcount, 0)
        return cur

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Iterator[tuple[Any, ...]]:
        """Run ``sql`` once per row; the rows a RETURNING clause gives, in order. psycopg
        sends the statements in pipeline mode: one round trip for them all."""
        if not rows:
            self._changes = 0
            return iter(())
        text, order = translate(sql)
        if order is not None:
            rows = [[row[i] for i in order] for row in rows]
        returning = _RETURNING.search(sql) is not None
        out: list[tuple[Any, ...]] = []
        with self.raw.cursor() as cur:
            cur.executemany(text, rows, returning=returning)
            self._changes = max(cur.rowcount, 0)
            if returning:
                while True:
                    out.extend(cur.fetchall())
                    if not cur.nextset():
                        break
        return iter(out)

    def copy_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
                  ) -> None:
        """Insert ``rows`` into ``table`` with COPY: one stream instead of a statement a
        row (identifiers come from the store's own table lists, never from input)."""
        with self.raw.cursor() as cur, cur.copy(
                f"COPY {table} ({', '.join(columns)}) FROM STDIN".encode()) as copy:
            for row in rows:
                copy.write_row(row)
        self._changes = len(rows)

    def changes(self) -> int:
        return self._changes
