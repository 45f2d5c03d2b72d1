"""Nodes: candidate hits from the keyword index, the hashed vectors and the provider's.

Each list holds at most CANDIDATES ``[exchange id, score]`` pairs (ids and small values
only: the texts stay in the store); ``nodes.extract.fusion`` merges them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from nodes.context import Cfg, RunContext, node
from nodes.extract.embedding_config import embedding_config
from nodes.extract.fusion import rounded
from store.backend import Backend
from store.search import (
    FtsSyntaxError,
    HitFilter,
    ids_matching,
    keyword_hits,
    syntax_notes,
)
from store.search_filter import live_sql
from store.sql import all_rows

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from store.vectors import MatrixCache

# The vector nodes import numpy when they run: a graph of keyword candidates only (the
# briefing of a hook) does not pay for it.

__all__ = [
    "CANDIDATES",
    "hit_filter",
    "keyword_candidates",
    "provider_candidates",
    "vector_candidates",
]

CANDIDATES = 100  # per list, before fusion; pages are cut from the fused list
_FILTERED_WIDTH = 4  # a filtered vector search looks this many times further


def hit_filter(query: Mapping[str, Any], cfg: Mapping[str, Any]) -> HitFilter:
    return HitFilter(
        session_id=query["session_row"],
        role=query["role"],
        since=query["since"],
        until=query["until"],
        compressed_only=bool(cfg.get("compressed_only", False)),
        trace_id=query.get("trace_id"),
        flag=query.get("flag"),
    )


class KeywordCandidatesWrites(TypedDict):
    keyword: Any
    notes: NotRequired[Any]


@node
def keyword_candidates(query: Any, fts: Any, *, run: RunContext,
                       cfg: Cfg) -> KeywordCandidatesWrites:
    if fts is None or fts["expression"] is None or query["unknown_session"]:
        return {"keyword": []}
    flt = hit_filter(query, cfg)
    caller_syntax = bool(fts.get("caller"))
    with run.store.read() as conn:
        derived = run.store.searched_keywords(conn)
        try:
            hits = keyword_hits(conn, fts["expression"], flt, CANDIDATES,
                                caller_syntax=caller_syntax, derived=derived)
            notes = syntax_notes(conn, fts["expression"], caller_syntax=caller_syntax)
        except FtsSyntaxError as ex:
            notes = [f"The query is not valid FTS5 syntax ({ex}); searched for its words "
                     "instead."]
            hits = []
            if fts["fallback"] is not None:
                hits = keyword_hits(conn, fts["fallback"], flt, CANDIDATES,
                                    derived=derived)
    return {"keyword": [[i, s] for i, s in hits], "notes": notes}


def _nearest(store: Backend, cache: MatrixCache, vec: npt.NDArray[np.float32],
             flt: HitFilter) -> list[list[Any]]:
    """KNN within the session, then the other filters (role, time, compressed, trace id,
    flag). A session's compressed turns are all but its few live ones: those are left
    out of the KNN itself, which then looks no further than CANDIDATES."""
    if flt.compressed_only and flt.session_id is not None and not flt.reads_rows:
        with store.read() as conn:
            live = {int(r[0]) for r in all_rows(conn, live_sql("?"), (flt.session_id,))}
            hits = cache.knn(conn, vec, CANDIDATES, flt.session_id, leave_out=live)
        return _rounded(hits)
    filtered = flt.reads_rows or flt.compressed_only
    wide = CANDIDATES * _FILTERED_WIDTH if filtered else CANDIDATES
    with store.read() as conn:
        hits = cache.knn(conn, vec, wide, flt.session_id)
        if filtered:
            keep = ids_matching(conn, [i for i, _ in hits], flt,
                                in_session=flt.session_id is not None)
            hits = [h for h in hits if h[0] in keep]
    return _rounded(hits[:CANDIDATES])


def _rounded(hits: list[tuple[int, float]]) -> list[list[Any]]:
    """[[id, similarity rounded to 6 places]]."""
    return [[i, s] for (i, _), s in zip(hits, rounded([s for _, s in hits], 6), strict=True)]


class VectorCandidatesWrites(TypedDict):
    semantic: Any


@node
def vector_candidates(query: Any, *, run: RunContext, cfg: Cfg) -> VectorCandidatesWrites:
    from nodes.extract.vectors import text_vector

    if query["text"] is None or query["unknown_session"]:
        return {"semantic": []}
    vec = text_vector(query["text"], run.settings.vector_dim)
    if not vec.any():
        return {"semantic": []}
    store = run.store
    return {"semantic": _nearest(store, store.vectors, vec, hit_filter(query, cfg))}


class ProviderCandidatesWrites(TypedDict):
    provider: Any
    notes: NotRequired[Any]


@node
def provider_candidates(query: Any, *, run: RunContext, cfg: Cfg) -> ProviderCandidatesWrites:
    """The provider's nearest turns (an empty list when none is configured, or when it
    cannot embed the query: the search goes on with the other lists, and says so)."""
    from nodes.extract.embeddings import EmbeddingError, embed_query
    from store.provider_vectors import provider_cache

    config = embedding_config(run.settings)
    if config is None or query["text"] is None or query["unknown_session"]:
        return {"provider": []}
    try:
        vec = embed_query(config, query["text"])
    except EmbeddingError as ex:
        return {"provider": [], "notes": [f"Embedding provider not used: {ex}"]}
    store = run.store
    cache = provider_cache(store, config.key)
    return {"provider": _nearest(store, cache, vec, hit_filter(query, cfg))}
