"""Vector nearest neighbours over stored int8 vectors.

The hashed vectors live in the ``exchange_vectors`` vec0 table (sqlite-vec), the
optional provider's in ``provider_vectors`` (``store.provider_vectors``). For speed
each process keeps a float32 copy in memory, brought up to date before every query by
reading only the rows added since (ids only grow: ``exchanges`` uses AUTOINCREMENT). A
search is then one matrix-vector product: ~1 ms for 20,000 turns, where a vec0 scan
takes ~10 ms.

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

    def _refresh(self, conn: Conn) -> None:
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
            scores = mat @ query
        k = min(k, len(ids))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(ids[i]), float(scores[i])) for i in top if scores[i] > 0.0]

    def forget(self) -> None:
        """Drop the copy (after deletions); the next query reloads it."""
        with self._lock:
            self._n = 0


class VectorCache(MatrixCache):
    """The hashed vectors of every turn (``exchange_vectors``)."""

    def rows_after(self, conn: Conn, last: int) -> list[Row]:
        return all_rows(conn, SELECT_NEW, (last,))

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
