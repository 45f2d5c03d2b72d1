"""The schema's operations (``store.schema``) in SQLite's SQL: an integer id is the
rowid (AUTOINCREMENT when an id is never given out again), bytes are BLOBs, the
keyword index is a contentless FTS5 table and the hashed vectors a vec0 table of int8
components."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

import apsw

from store import schema
from store.schema import Type

__all__ = ["EPOCH_KEY", "fts5_table", "keyword_epoch", "render", "step"]

# ``meta``: a number that grows whenever a row of the keyword index is removed (a forget;
# a turn indexed again, which removes its row first; every row, with the table). A
# trigger on FTS5's table of row sizes (``_docsize``: one row per indexed row, which
# FTS5 deletes in the statement that removes the row, so in its transaction) raises it,
# whichever code or process writes the index; so does the table's creation (a table
# dropped and made again). ``store.sqlite.doc_freq`` drops its kept document frequencies
# when it changes (a row written below the largest without a removal it finds by the
# row count). A trigger on the inserts would cost more than the ingest's index write
# itself (FTS5 with it: 21 -> 56 us a row).
EPOCH_KEY = "keyword_epoch"
_BUMP = (f"INSERT INTO meta(key, value) VALUES ('{EPOCH_KEY}', '1')"
         " ON CONFLICT (key) DO UPDATE SET value = value + 1")


def fts5_table(k: schema.KeywordTable) -> str:
    """The keyword index's FTS5 table alone (a store's has its epoch too: ``render``)."""
    # Contentless: the text lives once, in exchanges; deletable row by row.
    return (f"CREATE VIRTUAL TABLE {k.name} USING fts5(\n"
            f"  {', '.join(k.fields)}, content='', contentless_delete=1,\n"
            f"  tokenize='{k.tokenize}'\n)")


def keyword_epoch(table: str) -> str:
    """The keyword index ``table``'s trigger that raises ``meta``'s EPOCH_KEY, and one
    raise of it."""
    return (f"CREATE TRIGGER IF NOT EXISTS {table}_removed AFTER DELETE ON {table}_docsize\n"
            f"BEGIN {_BUMP}; END;\n" + _BUMP)


class SqliteRenderer(schema.Renderer):
    types: ClassVar[Mapping[Type, str]] = {
        Type.INT: "INTEGER", Type.REAL: "REAL", Type.TEXT: "TEXT", Type.BYTES: "BLOB"}

    def key(self, c: schema.Column) -> str:
        never_reused = " AUTOINCREMENT" if c.generated == "never_reused" else ""
        return f"{super().key(c)}{never_reused}"

    def table(self, t: schema.Table) -> str:
        return super().table(t) + (" WITHOUT ROWID" if t.clustered else "")

    # An entry of a rowid table's index ends with the rowid: ``then_id`` is implied.

    def keyword_table(self, k: schema.KeywordTable) -> str:
        return fts5_table(k) + ";\n" + keyword_epoch(k.name)

    def vector_table(self, v: schema.VectorTable) -> str:
        return (f"CREATE VIRTUAL TABLE {v.name} USING vec0(\n"
                f"  session_id integer, embedding int8[{v.dim}]\n);\n"
                + schema.vector_dim_row(v.dim))

    def new_store_id(self) -> str:
        return ("INSERT OR IGNORE INTO meta(key, value) "
                "VALUES ('store_id', lower(hex(randomblob(16))))")


render = SqliteRenderer().render


def _run(conn: apsw.Connection, op: schema.Operation) -> None:
    if not isinstance(op, schema.Data):
        conn.execute(render(op))
    elif not op.erases:
        op.run(conn)
    else:  # the rewritten rows zero the bytes they free
        conn.execute("PRAGMA secure_delete=ON")
        try:
            op.run(conn)
        finally:
            conn.execute("PRAGMA secure_delete=FAST")


def step(operations: Sequence[schema.Operation]) -> Callable[[apsw.Connection], None]:
    """One migration's operations run in order on a connection (in its transaction)."""
    def run(conn: apsw.Connection) -> None:
        for op in operations:
            _run(conn, op)
    return run
