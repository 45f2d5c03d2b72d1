"""Nodes: running notes and the compaction briefing as Markdown within a budget.

Each section is a group of whole items (nodes.publish.budget): a milestone, a flag, a
brief, a turn. A brief that does not fit whole shows its header and the milestones,
decisions, blockers or excerpts that fit, and says what it left out.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

from nodes.context import node
from nodes.publish.budget import Group, Item, fitted
from nodes.publish.wording import clipped, counted, plural

__all__ = ["GuardReply", "NotesReply", "NotesView", "guard_markdown", "notes_markdown",
           "notes_view"]

LIVE_RESERVE = 1_500  # at most this much of the budget is kept for the newest turns
QUERY_CHARS = 120  # of the query, in the briefing's heading
NOTHING_YET = "_No turns recorded in this session yet._"

# The lists of a tier-A brief body (nodes.extract.brief), by their label.
_LABELLED = {"Milestones:": "milestone", "Decisions:": "decision", "Blockers:": "blocker"}
_CITED = re.compile(r"^- (#\d+)")


Rows = list[dict[str, Any]] | None  # the session's items as nodes.load_evidence reads them


class NotesReply(TypedDict):
    """The notes graph's output: the running notes, and whether the session is known."""

    markdown: str
    found: bool


class GuardReply(TypedDict):
    """The guard graph's output: the briefing, the briefs and live turns it lists (ids;
    ``vector_only``: the briefs ranked by vector similarity alone), and whether the
    session is known."""

    markdown: str
    found: bool
    brief_ids: list[int]
    vector_only: list[int]
    live_exchange_ids: list[int]


def _live_section(live: list[dict[str, Any]]) -> Group:
    items = tuple(Item((f"- #{t['id']} [{t['role']}] {t['created_at']}: "
                        f"{clipped(t['content'], 300)}",), "exchange", f"#{t['id']}")
                  for t in live)
    return Group(("## Recent exchanges (uncompressed)",), items, newest_last=True,
                 empty="_none_")


def _body_parts(body: list[str]) -> tuple[Item | Group, ...]:
    """A stored brief body, after its head line, as items: each cited line, and each
    labelled list (tier A) as a group that is never shown without one of its lines."""
    parts: list[Item | Group] = []
    label: str | None = None
    listed: list[Item] = []

    def close() -> None:
        if label is not None:
            parts.append(Group((label,), tuple(listed)))

    for line in body:
        cited = _CITED.match(line)
        if line in _LABELLED:
            close()
            label, listed = line, []
        elif label is not None and cited:
            listed.append(Item((line,), _LABELLED[label], cited[1]))
        else:
            close()
            label = None
            ref = cited[1] if cited else "…"
            parts.append(Item((line,), "excerpt" if cited else "line", ref))
    close()
    return tuple(parts)


def _brief_item(b: dict[str, Any]) -> Item:
    """A brief: whole, or at the cut its header and the items of its body that fit."""
    score = f", score {b['score']:.4f}" if b.get("score") is not None else ""
    vector = ", vector only" if b.get("match") == "vector" else ""
    ids = ", ".join(f"#{i}" for i in b["source_ids"])
    header = f"### Brief {b['id']} (tier-{b['tier']}{score}{vector}) — sources {ids}"
    body = b["body"].splitlines()
    return Item((header, *body), "brief", f"brief {b['id']}",
                inner=lambda: Group((header, *body[:1]), _body_parts(body[1:])))


def _live_reserve(live: list[dict[str, Any]], cap: int) -> int:
    """Room kept for the newest turns while the sections above them are filled."""
    return min(cap, sum(len(t["content"]) for t in live[-5:]) + 200)


class NotesView(TypedDict):
    """The inspector's notes (inspect_notes): the running notes and what they list."""

    session_id: str
    markdown: str
    found: bool
    milestones: list[dict[str, Any]]
    briefs: list[dict[str, Any]]
    live: list[dict[str, Any]]


class NotesMarkdownWrites(TypedDict):
    reply: NotesReply


@node
def notes_markdown(session: str, live: Rows, max_chars: int, session_row: int | None,
                   milestones: Rows, flags: Rows, briefs: Rows) -> NotesMarkdownWrites:
    return {"reply": _notes(session, live, max_chars, session_row, milestones, flags, briefs)}


class NotesViewWrites(TypedDict):
    reply: NotesView


@node
def notes_view(session: str, live: Rows, max_chars: int, session_row: int | None,
               milestones: Rows, flags: Rows, briefs: Rows) -> NotesViewWrites:
    notes = _notes(session, live, max_chars, session_row, milestones, flags, briefs)
    return {"reply": NotesView(session_id=session, **notes, milestones=milestones or [],
                               briefs=briefs or [], live=live or [])}


def _notes(session: str, live: Rows, max_chars: int, session_row: int | None,
           milestones: Rows, flags: Rows, briefs: Rows) -> NotesReply:
    live = live or []
    title = [f"# Running notes — session {session!r}"]
    if session_row is None:
        return NotesReply(markdown="\n".join([*title, NOTHING_YET]), found=False)
    reserve = _live_reserve(live, LIVE_RESERVE)
    milestone_group = Group(("## Milestones",), tuple(
        Item((f"- #{m['exchange_id']} **{m['label']}** [{m['role']}]"
              + (f" (brief {m['brief_id']})" if m["brief_id"] else "")
              + f": {clipped(m['excerpt'], 160)}",), "milestone", f"#{m['exchange_id']}")
        for m in milestones or []), newest_last=True, empty="_none_")
    flag_group = Group(("## Reasoning-drift flags (NAFE, heuristic — not blockers)",), tuple(
        Item((f"- #{f['exchange_id']} {f['signature']}: “{clipped(f['span'], 120)}”",),
             "NAFE flag", f"#{f['exchange_id']}")
        for f in flags or []), newest_last=True)  # no heading when none
    brief_group = Group(("## Compressed briefs",), tuple(
        _brief_item(b) for b in briefs or []), newest_last=True, empty="_none_")
    sections = [(milestone_group, reserve), (flag_group, reserve), (brief_group, reserve),
                (_live_section(live), 0)]
    return NotesReply(markdown=fitted(max_chars, title, sections), found=True)


class GuardMarkdownWrites(TypedDict):
    reply: Any


@node
def guard_markdown(query: Any, live: Any, session: Any, briefs: Any, keyword: Any,
                   max_chars: Any) -> GuardMarkdownWrites:
    live = live or []
    title = [f"# Compaction briefing — session {session!r}"]
    if query["session_row"] is None:
        return {"reply": GuardReply(markdown="\n".join([*title, NOTHING_YET]), found=False,
                                    brief_ids=[], vector_only=[], live_exchange_ids=[])}
    briefs = briefs or []
    about = (f" for {clipped(query['text'], QUERY_CHARS)!r}" if query["text"]
             else " (newest; no query given)")
    heading = [f"## Top {counted(len(briefs), 'brief')}{about}"]
    if briefs and query["text"] is not None and not keyword:  # no keyword hit
        heading.append(f"_No compressed turn of this session matches a word of the query: "
                       f"the {plural(len(briefs), 'brief')} below "
                       f"{'is' if len(briefs) == 1 else 'are'} ranked by vector similarity "
                       "only._")
    ranked = Group(tuple(heading), tuple(_brief_item(b) for b in briefs), empty="_none_")
    reserve = _live_reserve(live, 2_000)
    markdown = fitted(max_chars, title, [(ranked, reserve), (_live_section(live), 0)])
    return {"reply": GuardReply(
        markdown=markdown, found=True, brief_ids=[b["id"] for b in briefs],
        vector_only=[b["id"] for b in briefs if b.get("match") == "vector"],
        live_exchange_ids=[t["id"] for t in live])}
