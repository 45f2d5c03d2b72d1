"""Vector nearest neighbours over stored int8 vectors.

The hashed vectors live in the ``exchange_vectors`` vec0 table (sqlite-vec), the
optional provider's in ``provider_vectors`` (``store.provider_vectors``). For speed
each process keeps a copy in memory, brought up to date before every query by reading
only the rows added since (ids only grow: ``exchanges`` uses AUTOINCREMENT); the rows
of turns the process ingested itself since are handed over by the ingest instead
(``MatrixCache.hold``), when nothing was written between them. An empty copy of the
hashed vectors is filled from vec0's chunk tables in one pass (``store.sqlite.vec0``).

The copy holds the stored int8 components as they are (128 MB for a million turns of
128 components, a quarter of a float32 copy), component-major: one contiguous run of a
million bytes per component. A query is answered in two passes, both exact:

1. Only the query's non-zero components can add to a score, and a query is short: the
   benchmark's queries hash their words' character trigrams into a median of 18 of the
   128 buckets (a turn's ~250 trigrams fill nearly all of them). The first pass reads
   just those runs, a block of rows at a time so that nothing of the store's size is
   copied, and sums their products in float32: the same sums as a full scan, added in
   another order (a query that fills every bucket costs what a full scan does).
   Sign bits (16 bytes a row, XOR and popcount) were measured first and rejected: the
   zero components of a short query make a Hamming distance mostly noise. On 100,000
   of the benchmark's turns, the nearest tenth of the store by Hamming distance held
   46% of the exact top 100 (93% with the distance counted over the query's non-zero
   components only), where this first pass misses nothing.
2. The candidates are the rows whose first-pass score is within the float32 rounding
   bound of two such sums (``_UNIT_ROUNDOFF``) of the k-th best, so no row of the true
   top k can be missed. They are scored again as a whole row each, the int8 row
   times the float32 query with numpy's ``einsum``, divided by 127 (the stored scale):
   the values a row-by-row scan gives, whatever rows are asked for with it.

A scope of at most a few times k rows (a session, a small store) is scored whole in
one pass: there the two passes cost more than they save (``_ONE_PASS``).

The top k of the first-pass scores is found without sorting them: a threshold from an
evenly spaced sample (every 8th score or sparser) keeps a few times k rows (checked:
when it keeps fewer than k, the whole array is partitioned). numpy partitions at 4-7
ns a score: in a store-wide search at 21,000 turns (k = 100) the whole array took
140-160 microseconds, the sample's way 50. Below 32 k scores the whole array is
partitioned. Each session's rows are found through one
array of positions sorted by session (with the start of each session's run), plus a
scan of the few rows appended since it was sorted: no list per session.

The products are numpy's own ``einsum`` loops, never BLAS (``@``): for a matrix this
size OpenBLAS hands ``@`` to its thread pool, whose threads then spin on the other core
after every call, and ``@`` would first make a float copy of the int8 rows; a loop that
never touches BLAS costs the same whatever the caller's BLAS settings are.

On PostgreSQL the same copy answers, filled from pgvector's rows by a binary COPY
(``store.postgres.vectors.PgVectorCache``); the provider's vectors keep a copy on both
backends.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence

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
_HELD = 4096  # rows held for the next query at most (~1 MB); more are read back then
SCALE = 127.0  # stored component = round(127 * unit-vector component)
_BLOCK = 32_768  # rows scored at a time by the first pass (its buffers stay in cache)
_TRANSPOSED = 4_096  # rows turned component-major at a time by a load (in cache)
_SAMPLE = 16_384  # first-pass scores sampled to find the candidates' threshold
_SPARSEST = 8  # ... at least every this many scores (a sample of at most an eighth)
_SAMPLED_FROM = 32  # ... from this many times k scores: the sample's rank from the top
#                      (4 k / step) is then at most an eighth of it
# Up to this many times k rows, one pass over whole rows costs less than two (measured,
# 100 queries on sessions of 100 to 20,000 rows: the two cost the same at 3-4 k rows
# for k = 100 and k = 400; a session of the benchmark's 200 turns, 0.05 ms against 0.08)
_ONE_PASS = 4
# Two float32 sums of the same d products (int8 times float32, each product rounded
# once), added in any two orders, differ by at most 2 * d * u * sum|q_j * x_j|
# <= 2 * d * u * 127 * sum|q_j| (u = 2**-24 the unit roundoff, |x_j| <= 127); twice
# that is the slack the candidates are kept within.
_UNIT_ROUNDOFF = 2.0**-24


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
        self._held: list[Row] = []  # rows this process committed since the last refresh
        self._ids = np.zeros(0, dtype=np.int64)
        self._sessions = np.zeros(0, dtype=np.int64)  # each row's session id
        self._cols = np.zeros((dim, 0), dtype=np.int8)  # component-major: one row a component
        # the first ``_sorted`` rows' positions sorted by session (ascending within one);
        # ``_keys`` the sessions in that order, ``_starts`` where each one's run begins
        self._sorted = 0
        self._by_session = np.zeros(0, dtype=np.int64)
        self._keys = np.zeros(0, dtype=np.int64)
        self._starts = np.zeros(1, dtype=np.int64)

    @property
    def nbytes(self) -> int:
        """Bytes held by the vectors of the copy (its capacity)."""
        return int(self._cols.nbytes)

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
        del block
        self._clear(rows.shape[1])
        if rows.T.flags.c_contiguous and rows.dtype == np.int8:  # taken as it is
            self._cols, self._ids, self._sessions = rows.T, ids, sessions
        else:
            self._reserve(len(ids))
            for at in range(0, len(ids), _TRANSPOSED):  # a block at a time (~0.1 s a million)
                part = rows[at : at + _TRANSPOSED]
                self._cols[:, at : at + len(part)] = part.T
            self._ids[: len(ids)], self._sessions[: len(ids)] = ids, sessions
        del rows
        self._n = len(ids)
        self._sort_sessions()

    def _reserve(self, need: int) -> None:
        if need <= len(self._ids):
            return
        size = max(need, len(self._ids) + len(self._ids) // 4, _GROW)
        self._ids = np.resize(self._ids, size)
        self._sessions = np.resize(self._sessions, size)
        cols = np.zeros((self.dim, size), dtype=np.int8)
        cols[:, : self._n] = self._cols[:, : self._n]
        self._cols = cols

    def _sort_sessions(self) -> None:
        """Sort every row's position by session (stable: ascending within one)."""
        sessions = self._sessions[: self._n]
        order = np.argsort(sessions, kind="stable")
        keys, starts = np.unique(sessions[order], return_index=True)
        self._by_session, self._keys = order, keys
        self._starts = np.append(starts, self._n).astype(np.int64)
        self._sorted = self._n

    def _refresh(self, conn: Conn) -> None:
        if not self._n:
            self._load(conn)  # then what was added since, below: nothing, in one snapshot
        if self._held:  # this process's own turns since (``hold``): not read back
            held, self._held = self._held, []
            self._append(held)
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
        self._append(rows)

    def _append(self, rows: Sequence[Row]) -> None:
        """Add ``(exchange id, session id, int8 blob)`` rows after the last one."""
        need = self._n + len(rows)
        self._reserve(need)
        blob = b"".join(bytes(r[2]) for r in rows)
        self._cols[:, self._n : need] = np.frombuffer(blob, dtype=np.int8).reshape(
            len(rows), self.dim).T
        self._ids[self._n : need] = [r[0] for r in rows]
        self._sessions[self._n : need] = [r[1] for r in rows]
        self._n = need
        if self._n - self._sorted > max(_GROW, self._sorted // 8):  # re-sorted seldom
            self._sort_sessions()

    def hold(self, exchange_id: int, session_id: int, vector: bytes) -> None:
        """Keep the row of a turn this process has just committed for the next query,
        which adds it to the copy with the others without reading it back from SQLite
        (a point lookup in vec0 a row: 200 rows, 0.3 ms warm and up to 0.8 cold, where
        adding them costs 0.15-0.2). Held here, not written into the copy at once: a
        single row written into the component-major copy touches one cache line per
        component (about 12 us, against under 1 us a row written 200 at a time).

        Only a row whose id is just above the copy's last (held rows included): ids
        grow by one in commit order under SQLite's one writer (AUTOINCREMENT), so the
        copy then holds every row before it. Otherwise (another process wrote in
        between, the copy is not loaded, a forgotten turn left a gap, ``_HELD`` rows
        wait already) the next query's refresh reads it as before."""
        with self._lock:
            if not self._n or len(vector) != self.dim or len(self._held) >= _HELD:
                return
            last = self._held[-1][0] if self._held else self._ids[self._n - 1]
            if last == exchange_id - 1:
                self._held.append((exchange_id, session_id, vector))

    def _session_rows(self, session_id: int) -> npt.NDArray[np.int64]:
        """Positions of a session's rows, ascending."""
        at = int(np.searchsorted(self._keys, session_id))
        held = self._by_session[0:0]
        if at < len(self._keys) and self._keys[at] == session_id:
            held = self._by_session[self._starts[at] : self._starts[at + 1]]
        if self._sorted == self._n:
            return held
        since = np.flatnonzero(self._sessions[self._sorted : self._n] == session_id)
        return np.concatenate([held, since + self._sorted])

    def _first_pass(self, query: npt.NDArray[np.float32],
                    rows: npt.NDArray[np.int64] | None) -> npt.NDArray[np.float32]:
        """Every row's score (of ``rows``, or of the whole copy), times 127, summed over
        the query's non-zero components only."""
        used = np.flatnonzero(query)
        weights = query[used]
        low, high = 0, self._n
        if rows is not None and len(rows):
            low, high = int(rows[0]), int(rows[-1]) + 1
        if rows is not None and high - low != len(rows):
            # the rows' values of each used component, one ``take`` a component: the
            # same matrix as a 2-D fancy index (``np.ix_``), which costs three times as
            # much (a session of 1,000 rows: 50 against 170 microseconds)
            picked = np.empty((len(used), len(rows)), dtype=np.int8)
            for at, component in enumerate(used.tolist()):
                self._cols[component].take(rows, out=picked[at])
            scores: npt.NDArray[np.float32] = np.einsum("ji,j->i", picked, weights,
                                                        dtype=np.float32)
            return scores
        # the whole copy, or rows that are one run of positions (a session whose turns
        # were not interleaved with another's): the same matrix read by slices, a block
        # at a time (a session of 1,000 rows: 9 against 37 microseconds for the takes)
        out = np.empty(high - low, dtype=np.float32)
        for at in range(low, high, _BLOCK):
            end = min(at + _BLOCK, high)
            np.einsum("ji,j->i", self._cols[used, at:end], weights, dtype=np.float32,
                      out=out[at - low : end - low])
        return out

    def exact_scores(self, query: npt.NDArray[np.float32],
                     positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """The cosine similarity of the rows at ``positions``: each whole int8 row times
        the float32 query, divided by 127 (the second pass)."""
        rows = np.ascontiguousarray(self._cols[:, positions].T)
        scores: npt.NDArray[np.float32] = np.einsum("ij,j->i", rows, query,
                                                    dtype=np.float32)
        scores /= np.float32(SCALE)
        return scores

    def knn(
        self,
        conn: Conn,
        query: npt.NDArray[np.float32],
        k: int,
        session_id: int | None = None,
        leave_out: Collection[int] = (),
    ) -> list[tuple[int, float]]:
        """The ``k`` most similar turns as (exchange id, cosine similarity), best first,
        none of ``leave_out`` (with a session: a few of its turns, e.g. the live ones when
        only compressed turns are asked for)."""
        query = np.asarray(query, dtype=np.float32)
        with self._lock:
            self._refresh(conn)
            if self._n and len(query) != self.dim:
                raise StoreError(f"a {len(query)}-component query against {self.dim}-component "
                                 "stored vectors")
            rows = None if session_id is None else self._session_rows(session_id)
            if leave_out:
                if rows is None:
                    rows = np.arange(self._n)
                left = np.fromiter(leave_out, dtype=np.int64, count=len(leave_out))
                rows = rows[~np.isin(self._ids[rows], left)]  # ascending still
            count = self._n if rows is None else len(rows)
            if not count or k <= 0 or not query.any():
                return []
            if count <= _ONE_PASS * k:  # every row scored whole, once
                positions = np.arange(count) if rows is None else rows
            else:
                slack = 4 * self.dim * _UNIT_ROUNDOFF * SCALE * float(np.abs(query).sum())
                picked = candidates(self._first_pass(query, rows), k, slack)
                positions = picked if rows is None else rows[picked]
            scores = self.exact_scores(query, positions)
            ids = self._ids[positions]
        top = np.argsort(-scores, kind="stable")[:k]
        top = top[scores[top] > 0.0]
        return list(zip(ids[top].tolist(), scores[top].tolist(), strict=True))

    def refresh(self, conn: Conn) -> None:
        """Bring the copy up to date with ``conn``'s snapshot now (loading it whole if
        it is empty), so that the next query reads only what was added since."""
        with self._lock:
            self._refresh(conn)

    def forget(self) -> None:
        """Drop the copy (after deletions); the next query reloads it."""
        with self._lock:
            self._clear(self.dim)


def candidates(scores: npt.NDArray[np.float32], k: int, slack: float
               ) -> npt.NDArray[np.int64]:
    """Positions of every score within ``slack`` of the ``k``-th best (of every score
    when there are at most ``k``), ascending; scores below ``-slack`` are left out, as
    no exact score of theirs can be positive."""
    n = len(scores)
    if n <= k:
        return np.flatnonzero(scores > -slack)
    if n >= _SAMPLED_FROM * k:
        # A threshold that an evenly spaced sample says about 4k rows reach: when at
        # least k do (ties or an uneven store may make it fewer), the k-th best is among
        # them, and only a threshold below it needs the whole array again.
        step = max(n // _SAMPLE, _SPARSEST)
        sample = scores[::step]
        rank = len(sample) - 1 - min(len(sample) - 1, 4 * k // step + 1)
        floor = float(np.partition(sample, rank)[rank])
        kept = np.flatnonzero(scores >= floor)
        if len(kept) >= k:
            values = scores[kept]
            low = max(float(np.partition(values, len(values) - k)[len(values) - k]),
                      0.0) - slack
            return kept[values >= low] if low >= floor else np.flatnonzero(scores >= low)
    low = max(float(np.partition(scores, n - k)[n - k]), 0.0) - slack
    return np.flatnonzero(scores >= low)


class VectorCache(MatrixCache):
    """The hashed vectors of every turn (``exchange_vectors``)."""

    def rows_after(self, conn: Conn, last: int) -> list[Row]:
        return all_rows(conn, SELECT_NEW, (last,))

    def everything(self, conn: Conn) -> Block | None:
        return vec0_chunks(conn)
