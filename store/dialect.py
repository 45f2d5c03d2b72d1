"""One store, two SQL dialects: the operations whose statements differ by backend.

The store modules write their statements once, in the SQL both backends run (SQLite's
``?`` parameters; ``store.postgres.connection`` rewrites them for psycopg). What differs
lives behind ``Dialect``, one implementation per backend: ``store.sqlite.dialect``
(FTS5, sqlite-vec, carray, pragmas) and ``store.postgres.dialect`` (tsvector, pgvector,
arrays, COPY, advisory locks, sequences). A store module asks ``dialect(conn)`` and
calls the operation; it never tests which backend it runs on.

A PostgreSQL connection names its dialect (``PgConnection.dialect``); an
``apsw.Connection`` names none and is SQLite's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from store.search_filter import HitFilter
from store.sql import Conn, Row
from store.sqlite.dialect import SQLITE

__all__ = ["Dialect", "KeywordEntry", "dialect"]

# A turn's keyword index entry: (exchange id, session id, its words, the words it
# borrows from the turns before it, its month and year).
KeywordEntry = tuple[int, int, str, str, str]


class Dialect(Protocol):
    name: str  # "sqlite" | "postgresql", as ``Backend.dialect``

    # --- keyword search ---------------------------------------------------------------------

    def keyword_hits(self, conn: Conn, expression: str, flt: HitFilter, limit: int, *,
                     caller_syntax: bool) -> list[tuple[int, float]]:
        """Best matches of an FTS5 expression as (exchange id, score), best first."""

    def syntax_notes(self, expression: str, *, caller_syntax: bool) -> list[str]:
        """What this dialect matches differently from FTS5 in a valid expression."""

    # --- a turn's index entries -------------------------------------------------------------

    def index_keywords(self, conn: Conn, exchange_id: int, session_id: int, content: str,
                       context: str, dated: str) -> None:
        """Add one turn's keyword index entry."""

    def index_keyword_page(self, conn: Conn, entries: Sequence[KeywordEntry]) -> None:
        """Add the keyword index entries of a page of copied turns."""

    def unindex_keywords(self, conn: Conn, ids: Sequence[int]) -> None:
        """Remove forgotten turns' keyword index entries."""

    def insert_vector(self, conn: Conn, exchange_id: int, session_id: int,
                      blob: bytes) -> None:
        """Store one turn's hashed vector (int8 components)."""

    def insert_vectors(self, conn: Conn, rows: Sequence[tuple[int, int, bytes]]) -> None:
        """Store the hashed vectors ``(exchange id, session id, int8 blob)`` of a page of
        copied turns."""

    def vectors_of(self, conn: Conn, ids: Sequence[int]) -> dict[int, bytes]:
        """The stored hashed vectors of ``ids`` as int8 blobs (absent: none stored)."""

    # --- writers ----------------------------------------------------------------------------

    def lock_turn_writers(self, conn: Conn) -> None:
        """Make every other turn writer wait until this write transaction ends."""

    def lock_turn(self, conn: Conn, exchange_id: int) -> None:
        """Wait for a write that holds the turn (a compression claiming it) to end, and
        hold the turn until this write transaction ends."""

    def locked_count(self, conn: Conn, key: str) -> int:
        """The integer ``meta`` value of ``key`` (0: no such row), which no other writer
        changes before this write transaction ends."""

    def insert_rows(self, conn: Conn, table: str, columns: Sequence[str],
                    rows: Sequence[Sequence[Any]]) -> None:
        """Insert many rows (``table`` and ``columns`` from the store's own lists)."""

    def insert_exchanges(self, conn: Conn, sql: str, rows: Sequence[Sequence[Any]]
                         ) -> list[int]:
        """Insert a batch's turns (``sql``: ``store.exchanges.INSERT_EXCHANGE``, its
        columns in ``rows``); their ids, in the rows' order."""

    # --- a turn's text ----------------------------------------------------------------------

    # true when the text of turn ``e`` (``exchanges e``) asks: its last character that is
    # not a space, tab or line break is a question mark, ASCII or full-width
    asks: str

    # --- bulk statements over a list of integers (GraphRAG provenance) ----------------------

    int_table: str  # a table of the integers bound as ?1, one column named ``value``

    def int_array(self, values: list[int]) -> object:
        """``values`` bound as the ?1 of ``int_table``."""

    def prepare_bulk_write(self, conn: Conn) -> None:
        """Set up the connection for a batch process's large writes."""

    # --- what the store occupies ------------------------------------------------------------

    def page_counts(self, conn: Conn) -> Row:
        """(page size, pages, free pages) of the database."""

    def table_bytes(self, conn: Conn) -> dict[str, int] | None:
        """Bytes per table, indexes included, largest first (None: not measurable)."""

    def has_migrations_table(self, conn: Conn) -> bool:
        """Whether ``schema_migrations`` exists."""

    # --- the contract audit -----------------------------------------------------------------

    def session_keyword_ids(self, conn: Conn, lo: int, hi: int, session_id: int) -> set[int]:
        """The keyword index rows of a session with ``lo < id <= hi``."""

    def vector_ids(self, conn: Conn, lo: int, hi: int) -> set[int]:
        """The hashed vector rows with ``lo < id <= hi``."""

    # --- copying a store into this one ------------------------------------------------------

    def defer_indexes(self, conn: Conn) -> list[str]:
        """Drop the indexes a bulk copy builds faster afterwards; the statements that
        build them again."""

    def advance_sequence(self, conn: Conn, table: str, column: str) -> None:
        """Ids the database gives ``table.column`` continue after the copied ones."""

    def finish_copy(self, conn: Conn, deferred: Sequence[str]) -> None:
        """Forgotten turns' ids are never given out again; the deferred indexes are
        built."""


def dialect(conn: Conn) -> Dialect:
    """The dialect of ``conn``."""
    found: Dialect = getattr(conn, "dialect", SQLITE)
    return found
