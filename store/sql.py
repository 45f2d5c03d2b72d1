"""Running statements: typed row helpers shared by the store modules."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from store.errors import StoreError

__all__ = ["Conn", "Row", "Transactions", "all_rows", "first", "id_list", "one", "where"]

Row = tuple[Any, ...]


class Conn(Protocol):
    """What the store modules need of a connection: ``apsw.Connection`` on SQLite,
    ``store.postgres.connection.PgConnection`` on PostgreSQL (the same ``?``/``?N``
    statements; the few that differ are operations of ``store.dialect``)."""

    def execute(self, statements: str, bindings: Any = None, /) -> Any: ...
    def executemany(self, statements: str, sequenceofbindings: Any, /) -> Any: ...
    def changes(self) -> int: ...


class Transactions(Protocol):
    """A store's transactions, as the modules it owns use them (``store.backend.Backend``
    has them): named here, so that such a module does not import its owner."""

    def read(self) -> AbstractContextManager[Conn]: ...
    def write(self) -> AbstractContextManager[Conn]: ...


def first(conn: Conn, sql: str, params: Sequence[Any] = ()) -> Row | None:
    """The first row, or None."""
    row = conn.execute(sql, params).fetchone()
    return None if row is None else tuple(row)


def one(conn: Conn, sql: str, params: Sequence[Any] = ()) -> Row:
    """Exactly the first row of a statement that always returns one."""
    row = first(conn, sql, params)
    if row is None:
        raise StoreError(f"no row returned by: {' '.join(sql.split())[:80]}")
    return row


def all_rows(conn: Conn, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    return [tuple(r) for r in conn.execute(sql, params)]


def id_list(column: str, ids: Sequence[int]) -> tuple[str, list[Any]]:
    """``column IN (?, ?, ...)`` and its parameters."""
    return f"{column} IN ({','.join('?' * len(ids))})", list(ids)


def where(*conditions: tuple[str, Any]) -> tuple[list[str], list[Any]]:
    """The conditions whose value is not None, each with one ``?`` for its value; a
    condition paired with True has no parameter (``("brief_id IS NOT NULL", True)``)."""
    clauses: list[str] = []
    params: list[Any] = []
    for clause, value in conditions:
        if value is None or value is False:
            continue
        clauses.append(clause)
        if value is not True:
            params.append(value)
    return clauses, params
