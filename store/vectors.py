"""Vector nearest neighbours over stored int8 vectors.

The hashed vectors live in the ``exchange_vectors`` vec0 table (sqlite-vec), the
optional provider's in ``provider_vectors`` (``store.provider_vectors``). For speed
each process keeps a float32 copy in memory, brought up to date before every query by
reading only the rows added since (ids only grow: ``exchanges`` uses AUTOINCREMENT); an
empty copy of the hashed vectors is filled from vec0's chunk tables in one pass. A
search is then one matrix-vector product: ~1 ms for 20,000 turns, where a vec0 scan
takes ~10 ms. The product is numpy's own ``einsum`` loop, not ``@``: for a matrix this
size OpenBLAS hands ``@`` to its thread pool, whose threads then spin on the other
core after every call (measured on two cores: 2.3 ms of CPU per call with one BLAS
thread, 7 ms with the default pool, 1.0-1.4 ms with ``einsum``). A loop that never
touches BLAS costs the same whatever the caller's BLAS settings are.

On PostgreSQL the database answers for the hashed vectors instead (pgvector): there,
several processes write and a turn with a smaller id can commit after one with a
larger id, so a copy that reads "the rows after the last id it has" would miss rows.
Within a session the session's vectors are scanned (exact, as the copy is); across
sessions the HNSW index is searched, with ``hnsw.ef_search`` at least the number of
neighbours asked for. (The provider's vectors keep the copy on both backends; see
``store.provider_vectors``.)
"""

from __future__ import annotations

import threading

import apsw
import numpy as np
import numpy.typing as npt

from store.errors import StoreError
from store.sql import Conn, Row, all_rows, is_postgres

__all__ = ["MatrixCache", "VectorCache", "query_text", "vector_text"]


def vector_text(blob: bytes) -> str:
    """An int8 vector blob in pgvector's text form, ``[1,-2,...]``."""
    return "[" + ",".join(map(str, np.frombuffer(blob, dtype=np.int8).tolist())) + "]"


def query_text(query: npt.NDArray[np.float32]) -> str:
    """A query vector in pgvector's text form."""
    return "[" + ",".join(f"{x:.6g}" for x in query.tolist()) + "]"


# vec0 cannot seek by rowid range (a `rowid > ?` scan reads every vector), so new rows
# are found through the exchanges primary key and fetched from vec0 by point lookups.
SELECT_NEW = """
SELECT e.id, e.session_id, v.embedding FROM exchanges e
JOIN exchange_vectors v ON v.rowid = e.id
WHERE e.id > ? ORDER BY e.id"""

_GROW = 4096

# A cold copy of a large store is read from vec0's own chunk tables (sqlite-vec 0.1.x:
# per chunk of ``size`` slots a validity bitmap, the rowids as int64, the vectors
# back to back and an int64 metadata column), ~1,000 rows for a million vectors where
# the SELECT_NEW path makes a million point lookups (~30 s). Any shape that differs
# from that layout, a count that differs from vec0's own, or a sampled row that differs
# from vec0's answer for it falls back to SELECT_NEW.
SELECT_CHUNKS = """
SELECT c.size, c.validity, c.rowids, v.vectors, m.data
FROM exchange_vectors_chunks c
JOIN exchange_vectors_vector_chunks00 v ON v.rowid = c.chunk_id
JOIN exchange_vectors_metadatachunks00 m ON m.rowid = c.chunk_id
ORDER BY c.chunk_id"""
COUNT_VECTORS = "SELECT count(*) FROM exchange_vectors_rowids"
SELECT_ONE = "SELECT session_id, embedding FROM exchange_vectors WHERE rowid = ?"

Block = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int8]]


def vec0_chunks(conn: Conn) -> Block | None:
    """Every stored hashed vector as (exchange ids ascending, session ids, int8 rows),
    read chunk by chunk from vec0's tables; None when their layout is not the known one."""
    try:
        chunks = all_rows(conn, SELECT_CHUNKS)
        expected = int(all_rows(conn, COUNT_VECTORS)[0][0]) if chunks else 0
    except apsw.SQLError:  # another sqlite-vec layout: use the SQL path
        return None
    ids, sessions, vectors = [], [], []
    for size, validity, rowids, blob, metadata in chunks:
        size = int(size)
        if size <= 0 or len(blob) % size or len(rowids) != 8 * size \
                or len(metadata) != 8 * size or len(validity) * 8 < size:
            return None
        valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8),
                              bitorder="little")[:size].astype(bool)
        ids.append(np.frombuffer(rowids, dtype=np.int64)[valid])
        sessions.append(np.frombuffer(metadata, dtype=np.int64)[valid])
        vectors.append(np.frombuffer(blob, dtype=np.int8).reshape(size, -1)[valid])
    if not expected or sum(len(i) for i in ids) != expected \
            or len({v.shape[1] for v in vectors}) != 1:
        return None
    all_ids = np.concatenate(ids)
    order = np.argsort(all_ids, kind="stable")
    block = all_ids[order], np.concatenate(sessions)[order], np.concatenate(vectors)[order]
    for at in (0, len(all_ids) // 2, len(all_ids) - 1):  # vec0 itself agrees on samples
        row = all_rows(conn, SELECT_ONE, (int(block[0][at]),))
        if not row or int(row[0][0]) != int(block[1][at]) \
                or bytes(row[0][1]) != block[2][at].tobytes():
            return None
    return block


# PostgreSQL (store.postgres.schema): stored components are the int8 values, so the
# inner product is divided by 127 as the in-memory copy divides the components.
KNN_SESSION_PG = """
WITH s AS MATERIALIZED (SELECT rowid, embedding FROM exchange_vectors WHERE session_id = ?)
SELECT rowid, -(embedding <#> ?::halfvec) / 127.0 AS score FROM s
ORDER BY score DESC, rowid LIMIT ?"""
KNN_ALL_PG = """
SELECT rowid, -(embedding <#> ?1::halfvec) / 127.0 FROM exchange_vectors
ORDER BY embedding <#> ?1::halfvec LIMIT ?2"""
SET_EF_SEARCH = "SELECT set_config('hnsw.ef_search', ?, true)"
EF_SEARCH_MIN, EF_SEARCH_MAX = 40, 1000  # pgvector's default and its largest


class MatrixCache:
    """An in-memory float32 copy of stored int8 vectors, refreshed incrementally.

    Subclasses say how to read the rows added after a given id, ascending:
    ``(exchange id, session id, int8 blob)``. The dimension is the stored one (the
    first row's length), so a cache never disagrees with its table.
    """

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._lock = threading.Lock()
        self._n = 0
        self._ids = np.zeros(0, dtype=np.int64)
        self._sessions = np.zeros(0, dtype=np.int64)
        self._mat = np.zeros((0, dim), dtype=np.float32)

    def rows_after(self, conn: Conn, last: int) -> list[Row]:
        raise NotImplementedError

    def everything(self, conn: Conn) -> Block | None:
        """Every stored row at once, when a subclass can read them faster than
        ``rows_after(conn, 0)`` (None: it cannot)."""
        return None

    def _load(self, conn: Conn) -> None:
        """Fill an empty copy with ``everything``, when it gives anything."""
        block = self.everything(conn)
        if block is None or not len(block[0]):
            return
        ids, sessions, rows = block
        self.dim = rows.shape[1]
        self._ids, self._sessions = ids, sessions  # arrays of their own (sorted copies)
        self._mat = np.divide(rows, 127.0, dtype=np.float32)
        self._n = len(ids)

    def _refresh(self, conn: Conn) -> None:
        if not self._n:
            self._load(conn)  # then what was added since, below: nothing, in one snapshot
        last = int(self._ids[self._n - 1]) if self._n else 0
        rows = self.rows_after(conn, last)
        if not rows:
            return
        width = len(bytes(rows[0][2]))
        if width != self.dim:
            if self._n:
                raise StoreError(f"stored vectors changed dimension ({self.dim} -> {width}); "
                                 "restart the server after a migration")
            self.dim = width
            self._mat = np.zeros((0, width), dtype=np.float32)
            self._ids = np.zeros(0, dtype=np.int64)
            self._sessions = np.zeros(0, dtype=np.int64)
        need = self._n + len(rows)
        if need > len(self._ids):
            size = max(need, len(self._ids) * 2, _GROW)
            self._ids = np.resize(self._ids, size)
            self._sessions = np.resize(self._sessions, size)
            mat = np.zeros((size, self.dim), dtype=np.float32)
            mat[: self._n] = self._mat[: self._n]
            self._mat = mat
        blob = b"".join(bytes(r[2]) for r in rows)
        block = np.frombuffer(blob, dtype=np.int8).reshape(len(rows), self.dim)
        self._ids[self._n : need] = [r[0] for r in rows]
        self._sessions[self._n : need] = [r[1] for r in rows]
        self._mat[self._n : need] = block.astype(np.float32) / 127.0
        self._n = need

    def knn(
        self,
        conn: Conn,
        query: npt.NDArray[np.float32],
        k: int,
        session_id: int | None = None,
    ) -> list[tuple[int, float]]:
        """The ``k`` most similar turns as (exchange id, cosine similarity), best first."""
        with self._lock:
            self._refresh(conn)
            if self._n and len(query) != self.dim:
                raise StoreError(f"a {len(query)}-component query against {self.dim}-component "
                                 "stored vectors")
            ids, mat = self._ids[: self._n], self._mat[: self._n]
            if session_id is not None:
                rows = np.flatnonzero(self._sessions[: self._n] == session_id)
                ids, mat = ids[rows], mat[rows]
            if len(ids) == 0:
                return []
            scores = np.einsum("ij,j->i", mat, query)
        k = min(k, len(ids))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        top = top[scores[top] > 0.0]
        return list(zip(ids[top].tolist(), scores[top].tolist(), strict=True))

    def forget(self) -> None:
        """Drop the copy (after deletions); the next query reloads it."""
        with self._lock:
            self._n = 0


class VectorCache(MatrixCache):
    """The hashed vectors of every turn (``exchange_vectors``)."""

    def rows_after(self, conn: Conn, last: int) -> list[Row]:
        return all_rows(conn, SELECT_NEW, (last,))

    def everything(self, conn: Conn) -> Block | None:
        return None if is_postgres(conn) else vec0_chunks(conn)

    def knn(
        self,
        conn: Conn,
        query: npt.NDArray[np.float32],
        k: int,
        session_id: int | None = None,
    ) -> list[tuple[int, float]]:
        """As ``MatrixCache.knn``; on PostgreSQL answered by pgvector (module docstring)."""
        if not is_postgres(conn):
            return super().knn(conn, query, k, session_id)
        if len(query) != self.dim:
            raise StoreError(f"a {len(query)}-component query against {self.dim}-component "
                             "stored vectors")
        if session_id is not None:
            found = all_rows(conn, KNN_SESSION_PG, (session_id, query_text(query), k))
        else:
            ef_search = min(max(k, EF_SEARCH_MIN), EF_SEARCH_MAX)
            all_rows(conn, SET_EF_SEARCH, (str(ef_search),))
            found = all_rows(conn, KNN_ALL_PG, (query_text(query), k))
        return [(int(i), float(s)) for i, s in found if float(s) > 0.0]
