"""Vectors from the optional embedding provider: the backlog, the writes, the search.

Turns are offered to the provider in id order; ``meta`` keeps, per model, the id up to
which every turn was offered (``provider_through:<model>``), so finding the backlog is
one index range read, and the rows of a model are written in ascending id order (the
in-memory copy then refreshes like the hashed vectors' one).

On PostgreSQL too the search reads an in-memory copy, not pgvector: a model's vectors
have the model's dimension (an HNSW index needs one fixed dimension, so each model
would need an index of its own, made when the model is first seen), and the table is
a plain ``bytea`` one on both backends. The copy reads "the rows after the last id it
has", which is right only if a model's rows commit in id order: ``save_provider_vectors``
makes sure of it on PostgreSQL by locking the model's mark row, so that of two
processes embedding the same backlog the second waits and then stores nothing.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

from store.dialect import dialect
from store.sql import Conn, Row, all_rows, first
from store.vectors import MatrixCache

if TYPE_CHECKING:
    from store.backend import Backend

__all__ = [
    "EMBED_CHARS",
    "PendingTurn",
    "ProviderCache",
    "forget_provider_caches",
    "pending_turns",
    "provider_cache",
    "provider_through",
    "save_provider_vectors",
]

EMBED_CHARS = 8_000  # of a turn sent to the provider: models read a few thousand tokens

PendingTurn = tuple[int, str]  # (exchange id, text)

SELECT_THROUGH = "SELECT value FROM meta WHERE key = ?"
UPSERT_THROUGH = """
INSERT INTO meta(key, value) VALUES (?1, ?2)
ON CONFLICT(key) DO UPDATE SET value = excluded.value"""
SELECT_PENDING = """
SELECT id, substr(content, 1, ?3) FROM exchanges WHERE id > ?1 ORDER BY id LIMIT ?2"""
INSERT_VECTOR = """
INSERT INTO provider_vectors(exchange_id, model, embedding) VALUES (?, ?, ?)
ON CONFLICT(model, exchange_id) DO UPDATE SET embedding = excluded.embedding"""
SELECT_NEW = """
SELECT p.exchange_id, e.session_id, p.embedding FROM provider_vectors p
JOIN exchanges e ON e.id = p.exchange_id
WHERE p.model = ?1 AND p.exchange_id > ?2 ORDER BY p.exchange_id"""


def _through_key(model: str) -> str:
    return f"provider_through:{model}"


def provider_through(conn: Conn, model: str) -> int:
    """Every turn up to this id was offered to ``model`` (0: none yet)."""
    row = first(conn, SELECT_THROUGH, (_through_key(model),))
    return int(row[0]) if row is not None else 0


def pending_turns(conn: Conn, model: str, limit: int) -> list[PendingTurn]:
    """The next ``limit`` turns not yet offered to ``model``, oldest first."""
    after = provider_through(conn, model)
    return [(int(r[0]), str(r[1])) for r in all_rows(conn, SELECT_PENDING,
                                                     (after, limit, EMBED_CHARS))]


def save_provider_vectors(conn: Conn, model: str, expected_through: int,
                          through: int, vectors: Sequence[tuple[int, bytes]]) -> bool:
    """Store vectors (int8 bytes) and move the mark to ``through``. Call inside a write.

    Returns False, storing nothing, when another process moved the mark since
    ``expected_through`` was read (it embedded the same turns).
    """
    # Concurrent backlogs: the second waits for the first's commit, then finds the mark moved.
    through_now = dialect(conn).locked_count(conn, _through_key(model))
    if through_now != expected_through:
        return False
    for exchange_id, blob in vectors:
        conn.execute(INSERT_VECTOR, (exchange_id, model, blob))
    conn.execute(UPSERT_THROUGH, (_through_key(model), str(through)))
    return True


class ProviderCache(MatrixCache):
    """The provider vectors of one model, in memory (see ``store.vectors``)."""

    def __init__(self, model: str) -> None:
        super().__init__(0)
        self.model = model

    def rows_after(self, conn: Conn, last: int) -> list[Row]:
        return all_rows(conn, SELECT_NEW, (self.model, last))


_CACHES: weakref.WeakKeyDictionary[Backend, dict[str, ProviderCache]] = (
    weakref.WeakKeyDictionary())
_CACHES_LOCK = threading.Lock()


def provider_cache(store: Backend, model: str) -> ProviderCache:
    """The process's in-memory copy of ``model``'s vectors in ``store`` (made on first use)."""
    with _CACHES_LOCK:
        caches = _CACHES.setdefault(store, {})
        cache = caches.get(model)
        if cache is None:
            cache = caches[model] = ProviderCache(model)
        return cache


def forget_provider_caches(store: Backend) -> None:
    """Drop the in-memory copies of ``store``'s provider vectors (after deletions)."""
    with _CACHES_LOCK:
        caches = list(_CACHES.get(store, {}).values())
    for cache in caches:
        cache.forget()
