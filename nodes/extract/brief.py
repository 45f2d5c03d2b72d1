"""Node: the text of a brief, extracted from its source turns (nothing generated).

Tier A when the batch holds decisions or milestones: the brief lists them (and the
blockers), each citing its turn. Tier B otherwise: a verbatim excerpt of each turn.
Cut to its length like a reply to its budget (nodes.publish.budget): whole lines.
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import node
from nodes.evaluate_contracts.inputs import iso
from nodes.publish.budget import Group, Item, fitted

__all__ = ["MAX_BRIEF_CHARS", "brief_draft", "brief_text"]

MAX_BRIEF_CHARS = 1_500
_LINE_CHARS = 160  # a decision, blocker or milestone line
_EXCERPT_CHARS = 72  # a tier-B excerpt: enough to recognise the turn, which stays stored
LEFT_IN_TURNS = "the source turns hold them"  # what a brief cut to its length says


def _clip(text: str, limit: int = _LINE_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def brief_text(batch: list[dict[str, Any]]) -> tuple[str, str]:
    """(tier, body) for a batch of turns, oldest first. A body longer than
    MAX_BRIEF_CHARS keeps whole lines and says what it left out (the turns hold it)."""
    first, last = batch[0], batch[-1]
    head = (
        f"Turns #{first['id']}–#{last['id']} ({len(batch)}), "
        f"{iso(first['created_at'])} – {iso(last['created_at'])}"
    )
    milestones = [(t["id"], t["milestone"]) for t in batch if t["milestone"]]
    decisions = [(t["id"], d) for t in batch for d in t["decisions"]]
    blockers = [(t["id"], b) for t in batch for b in t["blockers"]]
    tier = "A" if milestones or decisions else "B"
    parts: list[Item | Group] = []
    if tier == "A":
        for title, noun, items in (("Milestones", "milestone", milestones),
                                   ("Decisions", "decision", decisions),
                                   ("Blockers", "blocker", blockers)):
            if items:
                parts.append(Group((f"{title}:",), tuple(
                    Item((f"- #{i} {_clip(text)}",), noun, f"#{i}") for i, text in items)))
    else:
        parts += [Item((f"- #{t['id']} [{t['role']}] {_clip(t['excerpt'], _EXCERPT_CHARS)}",),
                       "excerpt", f"#{t['id']}") for t in batch]
        if blockers:
            parts.append(Item(("Blockers: " + ", ".join(f"#{i}" for i, _ in blockers),),
                              "list of blockers", f"#{blockers[0][0]}", "lists of blockers"))
    return tier, fitted(MAX_BRIEF_CHARS, [head], [(Group((), tuple(parts)), 0)], LEFT_IN_TURNS)


class BriefDraftWrites(TypedDict):
    draft: Any


@node
def brief_draft(batch: Any) -> BriefDraftWrites:
    if not batch:
        return {"draft": None}
    tier, body = brief_text(batch)
    return {"draft": {"tier": tier, "body": body}}
