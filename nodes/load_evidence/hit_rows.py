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
from store.signal_flags import StoredFlag, flags_by_exchange

__all__ = ["SNIPPET_CHARS", "hit_page", "snippet"]

SNIPPET_CHARS = 240


def snippet(content: str, terms: list[str], width: int = SNIPPET_CHARS) -> str:
    """A window of the turn around the first query word it contains."""
    flat = content[:50_000] if len(content) >= 50_000 else (
        content if _flat(content) else " ".join(content.split()))
    lower = flat.lower()
    first = -1
    for term in terms:
        at = lower.find(term)
        if at >= 0 and (first < 0 or at < first):
            first = at
    start = max(0, min(max(first, 0) - width // 4, len(flat) - width))
    piece = flat[start : start + width]
    return ("…" if start > 0 else "") + piece + ("…" if start + width < len(flat) else "")


def _flat(text: str) -> bool:
    """Whether ``text`` is its words joined by single spaces already (``str.split``'s
    whitespace is all unprintable but the ASCII space): most turns are, and the split
    and join cost two thirds of a snippet."""
    return (text.isprintable() and "  " not in text and not text.startswith(" ")
            and not text.endswith(" "))


def _signatures(flags: list[StoredFlag] | None) -> list[str]:
    """The NAFE signatures among a turn's flags, in SIGNATURES order."""
    if not flags:
        return []
    raised = {f.signature for f in flags}
    return [sig for sig in SIGNATURES if sig in raised]


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
            "flags": _signatures(flags.get(ex.id)),
        })
    more = len(ranked) > len(page) and bool(page)
    req = request or {}
    cursor = encode_cursor(req, page[-1][1], page[-1][0]) if more else None
    return {"hits": hits, "next_cursor": cursor, "total": total}
