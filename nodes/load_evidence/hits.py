"""Nodes: candidate hits from the keyword index and from the vectors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from nodes.extract.vectors import text_vector
from store.search import FtsSyntaxError, HitFilter, ids_matching, keyword_hits

__all__ = ["CANDIDATES", "hit_filter", "keyword_candidates", "vector_candidates"]

CANDIDATES = 200  # per list, before fusion; pages are cut from the fused list


def hit_filter(query: Mapping[str, Any], cfg: Mapping[str, Any]) -> HitFilter:
    return HitFilter(
        session_id=query["session_row"],
        role=query["role"],
        since=query["since"],
        until=query["until"],
        compressed_only=bool(cfg.get("compressed_only", False)),
    )


def keyword_candidates(state: State, cfg: Mapping[str, Any]) -> Writes:
    query, fts = state.get("query"), state.get("fts")
    if fts is None or fts["expression"] is None or query["unknown_session"]:
        return {"keyword": []}
    flt = hit_filter(query, cfg)
    with state.ctx.store.read() as conn:
        try:
            hits = keyword_hits(conn, fts["expression"], flt, CANDIDATES)
            notes: list[str] = []
        except FtsSyntaxError as ex:
            notes = [f"The query is not valid FTS5 syntax ({ex}); searched for its words "
                     "instead."]
            hits = []
            if fts["fallback"] is not None:
                hits = keyword_hits(conn, fts["fallback"], flt, CANDIDATES)
    return {"keyword": [[i, s] for i, s in hits], "notes": notes}


def vector_candidates(state: State, cfg: Mapping[str, Any]) -> Writes:
    query = state.get("query")
    if query["text"] is None or query["unknown_session"]:
        return {"semantic": []}
    vec = text_vector(query["text"], state.ctx.settings.vector_dim)
    if not vec.any():
        return {"semantic": []}
    flt = hit_filter(query, cfg)
    store = state.ctx.store
    with store.read() as conn:
        wide = CANDIDATES * 4 if (flt.role or flt.since or flt.until or flt.compressed_only) \
            else CANDIDATES
        hits = store.vectors.knn(conn, vec, wide, flt.session_id)
        if wide != CANDIDATES:
            keep = ids_matching(conn, [i for i, _ in hits], flt)
            hits = [h for h in hits if h[0] in keep]
    return {"semantic": [[i, round(s, 6)] for i, s in hits[:CANDIDATES]]}
