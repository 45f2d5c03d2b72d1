"""Node: one page of fused hits with their provenance (the rows behind the ids)."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import iso
from nodes.evaluate_contracts.query_input import encode_cursor
from nodes.extract.fusion import hit_match, listed_ids
from nodes.extract.nafe import SIGNATURES
from nodes.extract.terms import content_words
from store.exchanges import exchanges_by_ids
from store.signal_flags import flags_by_exchange

__all__ = ["SNIPPET_CHARS", "hit_page", "snippet"]

SNIPPET_CHARS = 240


def snippet(content: str, terms: list[str], width: int = SNIPPET_CHARS) -> str:
    """A window of the turn around the first query word it contains."""
    flat = " ".join(content.split()) if len(content) < 50_000 else content[:50_000]
    lower = flat.lower()
    first = min((p for p in (lower.find(t) for t in terms) if p >= 0), default=0)
    start = max(0, min(first - width // 4, len(flat) - width))
    piece = flat[start : start + width]
    return ("…" if start > 0 else "") + piece + ("…" if start + width < len(flat) else "")


class HitPageWrites(TypedDict):
    hits: Any
    next_cursor: Any
    total: Any


@node
def hit_page(query: Any, ranked: Any, keyword: Any, semantic: Any, provider: Any, request: Any, *,
             run: RunContext) -> HitPageWrites:
    ranked = ranked or []
    after = query["after"]
    total = len(ranked)  # of the whole query, whichever page this is
    if after is not None:
        score, last_id = after
        ranked = [h for h in ranked if (-h[1], h[0]) > (-score, last_id)]
    page = ranked[: query["limit"]]
    with run.store.read() as conn:
        rows = exchanges_by_ids(conn, [i for i, _ in page])
        flags = flags_by_exchange(conn, [i for i, _ in page])
    terms = content_words(query["text"] or "")
    keyword_ids = listed_ids(keyword)
    similar_ids = listed_ids(semantic, provider)
    hits = []
    for exchange_id, score in page:
        ex = rows.get(exchange_id)
        if ex is None:  # forgotten between ranking and reading
            continue
        hits.append({
            "exchange_id": ex.id,
            "session_id": ex.session,
            "role": ex.role,
            "created_at": iso(ex.created_at),
            "score": score,
            "match": hit_match((ex.id,), keyword_ids, similar_ids),
            "snippet": snippet(ex.content, terms),
            "decisions": ex.decisions,
            "blockers": ex.blockers,
            "brief_id": ex.brief_id,
            "trace_id": ex.trace_id,
            "flags": [sig for sig in SIGNATURES
                      if any(f.signature == sig for f in flags.get(ex.id, ()))],
        })
    more = len(ranked) > len(page) and bool(page)
    req = request or {}
    cursor = encode_cursor(req, page[-1][1], page[-1][0]) if more else None
    return {"hits": hits, "next_cursor": cursor, "total": total}
