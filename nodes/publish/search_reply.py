"""Node: the search graph's output (``SearchReply``): the page of hits, its text with
every hit citing its provenance, the cursor and the notes.

When the keyword index matched no turn for the query, the reply says so: whatever the
vector lists found then shares no word with the query, only similar spelling or
meaning, and each such hit is marked "vector only".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.publish.budget import Group, Item, fitted
from nodes.publish.wording import clipped, counted, plural

__all__ = ["SearchReply", "no_word_note", "search_reply"]

HIT_ADVICE = "the structured result lists every hit of the page"
QUERY_CHARS = 200  # of the query, in the first line
_MARKS = {"keyword": "", "vector": " (vector only)", "answer": " (answer to a ranked question)"}


class SearchReply(TypedDict):
    """What the search graph returns to its caller (the tool's and the command's only
    reading of the run)."""

    text: str
    hits: list[dict[str, Any]]
    total: int
    next_cursor: str | None
    notes: list[str]


def no_word_note(hits: int) -> str:
    """What a search reply says when the keyword index matched no turn."""
    found = (f"the {plural(hits, 'hit')} below {'is' if hits == 1 else 'are'} vector-only "
             "(similar spelling or meaning, no word in common)." if hits else "nothing matched.")
    return f"no turn searched matches a word of the query: {found}"


def _hit(h: Mapping[str, Any]) -> Item:
    where = f" brief {h['brief_id']}" if h["brief_id"] is not None else ""
    trace = f" trace:{h['trace_id']}" if h.get("trace_id") else ""
    flags = f" ⚠ NAFE:{','.join(h['flags'])}" if h.get("flags") else ""
    lines = [f"#{h['exchange_id']} [{h['role']}] {h['session_id']} {h['created_at']}"
             f" score {h['score']:.4f}{where}{trace}{flags}{_MARKS[h['match']]}",
             f"  {h['snippet']}",
             *(f"  decision: {d}" for d in h["decisions"][:3]),
             *(f"  blocker: {b}" for b in h["blockers"][:3])]
    return Item(tuple(lines), "hit", f"#{h['exchange_id']}")


class SearchReplyWrites(TypedDict):
    reply: Any
    notes: Any


@node
def search_reply(query: Any, hits: Any, request: Any, notes: Any, keyword: Any, total: Any,
                 next_cursor: Any, *, run: RunContext) -> SearchReplyWrites:
    hits = hits or []
    req = request or {}
    scope = "all sessions" if req.get("cross_session") else f"session {req.get('session_id')!r}"
    notes = list(notes or [])
    added = []
    if query["mode"] != "semantic" and not query["unknown_session"] and not keyword:
        added.append(no_word_note(len(hits)))  # the keyword index was asked and found nothing
    title = [f"Found {len(hits)} of {counted(total or 0, 'hit')} for "
             f"{clipped(query['text'], QUERY_CHARS)!r} ({query['mode']}; {scope})",
             *(f"Note: {note}" for note in [*notes, *added])]
    if query["unknown_session"]:
        title.append("Note: no turns have been recorded in this session.")
    more = ("More hits: pass next_cursor as cursor.",) if next_cursor else ()
    page = Group((), tuple(_hit(h) for h in hits), closing=more)
    reply: SearchReply = {
        "text": fitted(run.settings.max_chars, title, [(page, 0)], HIT_ADVICE),
        "hits": hits, "total": total or 0, "next_cursor": next_cursor,
        "notes": [*notes, *added]}
    return {"reply": reply, "notes": added}
