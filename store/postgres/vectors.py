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

A server process starts with an empty copy, and a COPY of a million rows took 2.7-4.5 s:
the first search of every new server waited for it. So the copy is also kept in the
process's data directory (``vectors-<store id>.bin``: the ids, sessions and component-
major rows as the copy holds them), written on a thread after a load from the database
and again once a tenth more rows have come since. A load reads that file instead when
it is this store's: the forgotten table holds as many tombstones as when it was written
(a forget by any process makes it stale) and the database's row at its largest id is
the file's (a database restored from another copy is not). The rows past it come from
the database, as after any load. It is a cache of the database: delete it at will.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

from store.postgres.kept import STORE_ID, vector_file
from store.sql import Conn, Row, first
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


# The kept copy's file: a header of KEPT_HEADER bytes (JSON, padded with spaces), then
# the ids and the sessions (int64) and the rows component-major (int8).
KEPT_HEADER = 4096
KEPT_VERSION = 1
KEPT_AGAIN = 0.1  # written again once this share of rows more came after it
KEPT_STATE = f"SELECT ({STORE_ID}), (SELECT count(*) FROM forgotten)"


class PgVectorCache(VectorCache):
    """The hashed vectors of every turn, copied in memory and kept in ``data_dir``
    (module docstring)."""

    def __init__(self, dim: int, data_dir: Path) -> None:
        super().__init__(dim)
        self.data_dir = data_dir
        self._kept_rows = 0  # rows of the copy the kept file holds
        self._writing: threading.Thread | None = None

    def _load(self, conn: Conn) -> None:
        kept = self._kept(conn)
        if self._read_kept(conn, *kept):
            return
        super()._load(conn)
        if self._n:
            self._keep(*kept)

    def _refresh(self, conn: Conn) -> None:
        super()._refresh(conn)
        if self._kept_rows and self._n - self._kept_rows > KEPT_AGAIN * self._kept_rows:
            self._keep(*self._kept(conn))

    def _kept(self, conn: Conn) -> tuple[Path, int]:
        """The kept file of this store and the forgotten table's tombstones now."""
        state = first(conn, KEPT_STATE)
        assert state is not None
        return vector_file(self.data_dir, str(state[0])), int(state[1])

    def _read_kept(self, conn: Conn, path: Path, tombstones: int) -> bool:
        """Fill the copy from ``path`` when it is this store's as it stands."""
        try:
            with path.open("rb") as f:
                head = json.loads(f.read(KEPT_HEADER))
                rows, dim = int(head["rows"]), int(head["dim"])
                if (head.get("version") != KEPT_VERSION or head["tombstones"] != tombstones
                        or os.fstat(f.fileno()).st_size != KEPT_HEADER + rows * (16 + dim)):
                    return False
                ids = np.fromfile(f, np.int64, rows)
                sessions = np.fromfile(f, np.int64, rows)
                cols = np.fromfile(f, np.int8, rows * dim).reshape(dim, rows)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return False  # not a file this module wrote whole
        if not rows:
            return False
        last_id, last_session, last_row = read_vectors(conn, int(ids[-1]) - 1, 1)
        if not (len(last_id) == 1 and last_id[0] == ids[-1] and last_session[0] == sessions[-1]
                and np.array_equal(last_row[0], cols[:, -1])):
            return False  # not this database's rows
        self._clear(dim)
        self._cols, self._ids, self._sessions, self._n = cols, ids, sessions, rows
        self._sort_sessions()
        self._kept_rows = rows
        return True

    def _keep(self, path: Path, tombstones: int) -> None:
        """Write the copy as it stands to ``path`` on a thread (one at a time)."""
        if self._writing is not None and self._writing.is_alive():
            return
        n = self._n
        parts = (self._ids[:n], self._sessions[:n], self._cols[:, :n])
        head = json.dumps({"version": KEPT_VERSION, "rows": n, "dim": self.dim,
                           "tombstones": tombstones}).encode()
        self._kept_rows = n
        self._writing = threading.Thread(target=_write_kept, args=(path, head, parts),
                                         name="vector-copy-keep", daemon=True)
        self._writing.start()

    def wait(self) -> None:
        """Until the kept file being written, if any, is written."""
        if self._writing is not None:
            self._writing.join()

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


def _write_kept(path: Path, head: bytes, parts: tuple[np.ndarray[Any, Any], ...]) -> None:
    """The kept copy's file, written whole under another name first (``name.pid.thread``:
    one a killed process left is removed by the next write)."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        for left in path.parent.glob(f"{path.name}.*.*"):
            pid = left.name.split(".")[-2]
            if pid.isdigit() and not _alive(int(pid)):
                left.unlink(missing_ok=True)
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(head.ljust(KEPT_HEADER))
            for part in parts:
                for row in part if part.ndim == 2 else (part,):
                    f.write(np.ascontiguousarray(row).data)
        os.replace(temporary, path)
    except OSError as ex:
        temporary.unlink(missing_ok=True)
        print(f"stenographer: the vector copy could not be kept in {path}: {ex}",
              file=sys.stderr)


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs (as far as this user can tell)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
