"""Vector nearest neighbours over stored int8 vectors.

The hashed vectors live in the ``exchange_vectors`` vec0 table (sqlite-vec), the
optional provider's in ``provider_vectors`` (``store.provider_vectors``). For speed
each process keeps a copy in memory, brought up to date before every query by reading
only the rows added since (ids only grow: ``exchanges`` uses AUTOINCREMENT); an empty
copy of the hashed vectors is filled from vec0's chunk tables in one pass
(``store.sqlite.vec0``).

The copy holds the stored int8 components as they are (128 MB for a million turns of
128 components, a quarter of a float32 copy) and each row's position by session, so a
session's search reads only that session's rows whatever the size of the store. The
scores are exact: the int8 rows are multiplied by the float32 query in float32 and the
sums divided by 127 (the stored scale), the same values as a float32 copy would give,
so nothing is re-ranked. The product is numpy's own ``einsum`` loop, not ``@``: for a
matrix this size OpenBLAS hands ``@`` to its thread pool, whose threads then spin on
the other core after every call (measured on two cores: 2.3 ms of CPU per call with one
BLAS thread, 7 ms with the default pool, 1.0-1.4 ms with ``einsum``), and ``@`` would
first make a float copy of the int8 matrix; ``einsum`` casts it in small buffers. A loop
that never touches BLAS costs the same whatever the caller's BLAS settings are.

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
SCALE = 127.0  # stored component = round(127 * unit-vector component)


class MatrixCache:
    """An in-memory copy of stored int8 vectors, refreshed incrementally.

    Subclasses say how to read the rows added after a given id, ascending:
    ``(exchange id, session id, int8 blob)``. The dimension is the stored one (the
    first row's length), so a cache never disagrees with its table.
    """

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._lock = threading.Lock()
        self._clear(dim)

    def _clear(self, dim: int) -> None:
        self.dim = dim
        self._n = 0
        self._ids = np.zeros(0, dtype=np.int64)
        self._mat = np.zeros((0, dim), dtype=np.int8)
        # session id -> positions of its rows in the copy, ascending (lists while rows
        # are appended; an array once a query asked for it)
        self._rows: dict[int, list[int] | npt.NDArray[np.intp]] = {}

    @property
    def nbytes(self) -> int:
        """Bytes held by the vectors of the copy (its capacity)."""
        return int(self._mat.nbytes)

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
        self._clear(rows.shape[1])
        self._ids, self._mat = ids, np.ascontiguousarray(rows, dtype=np.int8)
        self._n = len(ids)
        order = np.argsort(sessions, kind="stable")
        keys, starts = np.unique(sessions[order], return_index=True)
        for key, part in zip(keys.tolist(), np.split(order, starts[1:]), strict=True):
            self._rows[key] = part

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
            self._clear(width)
        need = self._n + len(rows)
        if need > len(self._ids):
            size = max(need, len(self._ids) * 2, _GROW)
            self._ids = np.resize(self._ids, size)
            mat = np.zeros((size, self.dim), dtype=np.int8)
            mat[: self._n] = self._mat[: self._n]
            self._mat = mat
        blob = b"".join(bytes(r[2]) for r in rows)
        self._mat[self._n : need] = np.frombuffer(blob, dtype=np.int8).reshape(len(rows),
                                                                             self.dim)
        self._ids[self._n : need] = [r[0] for r in rows]
        for at, row in enumerate(rows, start=self._n):
            held = self._rows.get(int(row[1]))
            if held is None:
                self._rows[int(row[1])] = [at]
            elif isinstance(held, list):
                held.append(at)
            else:
                self._rows[int(row[1])] = [*held.tolist(), at]
        self._n = need

    def _session_rows(self, session_id: int) -> npt.NDArray[np.intp]:
        held = self._rows.get(session_id)
        if held is None:
            return np.zeros(0, dtype=np.intp)
        if isinstance(held, list):
            held = self._rows[session_id] = np.array(held, dtype=np.intp)
        return held

    def knn(
        self,
        conn: Conn,
        query: npt.NDArray[np.float32],
        k: int,
        session_id: int | None = None,
    ) -> list[tuple[int, float]]:
        """The ``k`` most similar turns as (exchange id, cosine similarity), best first."""
        query = np.asarray(query, dtype=np.float32)
        with self._lock:
            self._refresh(conn)
            if self._n and len(query) != self.dim:
                raise StoreError(f"a {len(query)}-component query against {self.dim}-component "
                                 "stored vectors")
            if session_id is not None:
                rows = self._session_rows(session_id)
                ids, mat = self._ids[rows], self._mat[rows]
            else:
                ids, mat = self._ids[: self._n], self._mat[: self._n]
            if len(ids) == 0:
                return []
            scores = np.einsum("ij,j->i", mat, query, dtype=np.float32)
        scores /= np.float32(SCALE)
        k = min(k, len(ids))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        top = top[scores[top] > 0.0]
        return list(zip(ids[top].tolist(), scores[top].tolist(), strict=True))

    def forget(self) -> None:
        """Drop the copy (after deletions); the next query reloads it."""
        with self._lock:
            self._clear(self.dim)


class VectorCache(MatrixCache):
    """The hashed vectors of every turn (``exchange_vectors``)."""

    def rows_after(self, conn: Conn, last: int) -> list[Row]:
        return all_rows(conn, SELECT_NEW, (last,))

    def everything(self, conn: Conn) -> Block | None:
        return vec0_chunks(conn)
