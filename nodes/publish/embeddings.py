"""Node: give the embedding provider the turns it has not seen yet (when one is set).

Ingest never waits for the provider: turns are recorded, indexed for keywords and
hashed vectors, and the provider's vectors are filled in here, in id order, in
batches, within a time budget per run (a search runs this first, so the turns it can
find are the ones recorded before it; the ``embed`` graph runs it alone). When the
provider is down or slow the backlog simply waits for a later run.
"""

from __future__ import annotations

import time
from typing import Any, NotRequired, TypedDict

from nodes.context import Cfg, RunContext, node
from nodes.extract.embedding_config import embedding_config
from nodes.extract.embeddings import EmbeddingError, embed
from nodes.extract.vectors import quantize
from store.provider_vectors import pending_turns, provider_through, save_provider_vectors

__all__ = ["BACKLOG_SECONDS", "embedded_backlog"]

BACKLOG_SECONDS = 1.0  # per search; the `embed` graph passes its own budget


def _embed_each(config: Any, batch: list[tuple[int, str]]) -> list[tuple[int, bytes]]:
    """One by one, after the provider rejected a batch: the texts it refuses are left
    without a provider vector (they keep their keyword and hashed entries)."""
    out = []
    for exchange_id, text in batch:
        try:
            out.append((exchange_id, quantize(embed(config, [text])[0])))
        except EmbeddingError as ex:
            if not ex.permanent:
                raise
    return out


class EmbeddedBacklogWrites(TypedDict):
    embedded: NotRequired[Any]
    notes: NotRequired[Any]


@node
def embedded_backlog(*, run: RunContext, cfg: Cfg) -> EmbeddedBacklogWrites:
    config = embedding_config(run.settings)
    if config is None:
        return {}
    budget = float(cfg.get("seconds", BACKLOG_SECONDS))
    store = run.store
    started = time.monotonic()
    done = 0
    notes: list[str] = []
    while time.monotonic() - started < budget:
        with store.read() as conn:
            expected = provider_through(conn, config.key)
            batch = pending_turns(conn, config.key, config.batch)
        if not batch:
            break
        try:
            try:
                vectors = [(i, quantize(v)) for (i, _), v in
                           zip(batch, embed(config, [t for _, t in batch]), strict=True)]
            except EmbeddingError as ex:
                if not ex.permanent:
                    raise
                vectors = _embed_each(config, batch)
        except EmbeddingError as ex:
            notes.append(f"Embedding provider backlog waits: {ex}")
            break
        with store.write() as conn:
            saved = save_provider_vectors(conn, config.key, expected, batch[-1][0], vectors)
        done += len(vectors) if saved else 0
    return {"embedded": done, "notes": notes}
