"""Vector nearest neighbours over stored int8 vectors.

The hashed vectors live in the ``exchange_vectors`` vec0 table (sqlite-vec), the
optional provider's in ``provider_vectors`` (``store.provider_vectors``). For speed
each process keeps a float32 copy in memory, brought up to date before every query by
reading only the rows added since (ids only grow: ``exchanges`` uses AUTOINCREMENT); an
empty copy of the hashed vectors is filled from vec0's chunk tables in one pass
(``store.sqlite.vec0``). A search is then one matrix-vector product: ~1 ms for 20,000
turns, where a vec0 scan takes ~10 ms. The product is numpy's own ``einsum`` loop, not
``@``: for a matrix this size OpenBLAS hands ``@`` to its thread pool, whose threads
then spin on the other core after every call (measured on two cores: 2.3 ms of CPU per
call with one BLAS thread, 7 ms with the default pool, 1.0-1.4 ms with ``einsum``). A
loop that never touches BLAS costs the same whatever the caller's BLAS settings are.

On PostgreSQL the database answers for the hashed vectors instead (pgvector:
``store.postgres.vectors``); the provider's vectors keep the copy on both backends.
"""

from __future__ import annotations

import threading

import numpy as np
import numpy.typing as npt

from store.errors import StoreError
from store.sql import Conn, Row, all_rows
from store.sqlite.vec0 import Block, vec0_chunks

__all__ = ["Block", "MatrixCache", "VectorCache"]


# vec0 cannot seek by rowid range (a `rowid > ?` scan reads every vector), so new rows
# are found through the exchanges primary key and fetched from vec0 by point lookups.
SELECT_NEW = """
SELECT e.id, e.session_id, v.embedding FROM exchanges e
JOIN exchange_vectors v ON v.rowid = e.id
WHERE e.id > ? ORDER BY e.id"""

_GROW = 4096


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
        return vec0_chunks(conn)
