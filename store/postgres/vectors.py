"""Hashed vectors on PostgreSQL: pgvector's ``halfvec`` and its text form, and the
process's in-memory copy of them.

As on SQLite (``store.vectors``), each process keeps a copy of the stored int8 rows and
their sessions, brought up to date before each search by reading the rows added after
the newest id it holds, and answers both the session's and the store-wide nearest
neighbours from it, exactly. That is sound with several writing processes because
exchange ids are committed in id order: every turn writer takes the turn writers'
transaction lock before it draws an id (``store.provenance.session_head``), so a
transaction that commits later holds only larger ids, and no reader passes over a row.

There is no approximate (HNSW) index on the hashed vectors: maintaining one costs 1-4 ms
of server CPU a turn (a search of the graph on every insert, measured on a 2-core
machine), which is the whole budget of a bulk ingest of thousands of turns a second,
and its answers are approximate. The copy holds 128 bytes a turn for 128 components
(128 MB for a million turns); a store-wide search scores it in two passes, exact
(``store.vectors``).

Rows are read with a binary COPY, a page at a time: fixed-size rows that numpy reads in
one pass, a tenth of the time of parsing pgvector's text form.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

import numpy as np

from store.sql import Conn, Row
from store.vectors import Block, VectorCache

__all__ = ["PAGE_ROWS", "PgVectorCache", "int8_blob", "read_vectors", "vector_text"]


# Each byte's value as an int8, in text: a bulk write formats 128 of them a turn (by
# this table 5 us a vector, by numpy's tolist and str 28 us).
_INT8_TEXT = [str(b if b < 128 else b - 256) for b in range(256)]


def vector_text(blob: bytes) -> str:
    """An int8 vector blob in pgvector's text form, ``[1,-2,...]``."""
    return "[" + ",".join([_INT8_TEXT[b] for b in blob]) + "]"


def int8_blob(text: str) -> bytes:
    """pgvector's text form of a halfvec of whole numbers, as the int8 blob SQLite keeps."""
    values = np.array(text.strip("[]").split(","), dtype=np.float32)
    return bytes(np.rint(values).astype(np.int8).tobytes())


PAGE_ROWS = 100_000  # rows a COPY reads at a time (~27 MB for 128 components)
COPY_AFTER = """
COPY (SELECT rowid, session_id, embedding FROM exchange_vectors WHERE rowid > {after}
      ORDER BY rowid LIMIT {limit}) TO STDOUT (FORMAT BINARY)"""
# COPY's binary form: a 19-byte header (signature, flags, extension length), then per
# row the field count and each field's length and value, big-endian; a 2-byte trailer.
# halfvec sends its dimension, a reserved int16 and the float16 components.
HEADER, TRAILER = 19, 2


def _row_type(dim: int) -> np.dtype[np.void]:
    return np.dtype([("fields", ">i2"), ("id_len", ">i4"), ("id", ">i8"), ("s_len", ">i4"),
                     ("session", ">i8"), ("v_len", ">i4"), ("dim", ">i2"), ("unused", ">i2"),
                     ("v", ">f2", (dim,))])


def _parse(data: bytes) -> Block:
    """The rows of one binary COPY of ``COPY_AFTER``."""
    body = memoryview(data)[HEADER:len(data) - TRAILER]
    if not len(body):
        return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 0), np.int8))
    dim = int(np.frombuffer(body, ">i2", 1, 2 + 12 + 12 + 4)[0])
    rows = np.frombuffer(body, _row_type(dim))
    if not ((rows["fields"] == 3).all() and (rows["v_len"] == 4 + 2 * dim).all()):
        raise ValueError("unexpected layout of exchange_vectors in a binary COPY")
    return (rows["id"].astype(np.int64), rows["session"].astype(np.int64),
            np.rint(rows["v"].astype(np.float32)).astype(np.int8))


class _Raw(Protocol):
    @property
    def raw(self) -> Any: ...  # a PgConnection's psycopg connection


def read_vectors(conn: Conn, after: int, limit: int = PAGE_ROWS) -> Block:
    """Up to ``limit`` stored vectors with ids above ``after``, ascending: ids, session
    ids and the int8 rows."""
    raw = cast(_Raw, conn).raw
    sql = COPY_AFTER.format(after=int(after), limit=int(limit))
    with raw.cursor() as cur, cur.copy(sql.encode()) as copy:
        data = b"".join(bytes(chunk) for chunk in copy)
    return _parse(data)


class PgVectorCache(VectorCache):
    """The hashed vectors of every turn, copied in memory (module docstring)."""

    def rows_after(self, conn: Conn, last: int) -> list[Row]:
        ids, sessions, rows = read_vectors(conn, last, 2**62)
        return list(zip(ids.tolist(), sessions.tolist(), (r.tobytes() for r in rows),
                        strict=True))

    def everything(self, conn: Conn) -> Block | None:
        parts: list[Block] = []
        after = 0
        while True:
            part = read_vectors(conn, after)
            if not len(part[0]):
                break
            parts.append(part)
            after = int(part[0][-1])
            if len(part[0]) < PAGE_ROWS:
                break
        if not parts:
            return None
        return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                np.concatenate([p[2] for p in parts]))
