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

# ``meta``: a number that grows whenever a row of the keyword index is removed, or a row
# is written below the largest rowid (a turn indexed again, a forgotten turn): every
# other write appends rows above the largest, so the document frequencies kept by
# ``store.sqlite.doc_freq`` are brought up to date by counting the rows above the last
# they counted, until it changes. Triggers on FTS5's table of row sizes (``_docsize``,
# one row per indexed row, written by FTS5 in the writing statement, so in its
# transaction) raise it, whichever code or process writes the index; so does the
# table's creation (a table dropped and created again).
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
    """The keyword index ``table``'s triggers that raise ``meta``'s EPOCH_KEY, and one
    raise of it."""
    sizes = f"{table}_docsize"
    return (f"CREATE TRIGGER IF NOT EXISTS {table}_removed AFTER DELETE ON {sizes}\n"
            f"BEGIN {_BUMP}; END;\n"
            f"CREATE TRIGGER IF NOT EXISTS {table}_written_below AFTER INSERT ON {sizes}\n"
            f"WHEN EXISTS (SELECT 1 FROM {sizes} WHERE id > new.id)\n"
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
