"""Node: the text of a brief, extracted from its source turns (nothing generated).

Tier A when the batch holds decisions or milestones: the brief lists them (and the
blockers), each citing its turn. Tier B otherwise: a verbatim excerpt of each turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from nodes.evaluate_contracts.inputs import iso

__all__ = ["MAX_BRIEF_CHARS", "brief_draft", "brief_text"]

MAX_BRIEF_CHARS = 1_500
_LINE_CHARS = 160  # a decision, blocker or milestone line
_EXCERPT_CHARS = 72  # a tier-B excerpt: enough to recognise the turn, which stays stored


def _clip(text: str, limit: int = _LINE_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def brief_text(batch: list[dict[str, Any]]) -> tuple[str, str]:
    """(tier, body) for a batch of turns, oldest first."""
    first, last = batch[0], batch[-1]
    head = (
        f"Turns #{first['id']}–#{last['id']} ({len(batch)}), "
        f"{iso(first['created_at'])} – {iso(last['created_at'])}"
    )
    milestones = [(t["id"], t["milestone"]) for t in batch if t["milestone"]]
    decisions = [(t["id"], d) for t in batch for d in t["decisions"]]
    blockers = [(t["id"], b) for t in batch for b in t["blockers"]]
    lines = [head]
    tier = "A" if milestones or decisions else "B"
    if tier == "A":
        for title, items in (("Milestones", milestones), ("Decisions", decisions),
                             ("Blockers", blockers)):
            if items:
                lines.append(f"{title}:")
                lines.extend(f"- #{i} {_clip(text)}" for i, text in items)
    else:
        lines.extend(f"- #{t['id']} [{t['role']}] {_clip(t['excerpt'], _EXCERPT_CHARS)}"
                     for t in batch)
        if blockers:
            lines.append("Blockers: " + ", ".join(f"#{i}" for i, _ in blockers))
    body = "\n".join(lines)
    if len(body) > MAX_BRIEF_CHARS:
        body = body[: MAX_BRIEF_CHARS - 1] + "…"
    return tier, body


def brief_draft(state: State, cfg: Mapping[str, Any]) -> Writes:
    batch = state.get("batch")
    if not batch:
        return {"draft": None}
    tier, body = brief_text(batch)
    return {"draft": {"tier": tier, "body": body}}
