"""Nodes: running notes and the compaction briefing as Markdown within a budget."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from nodes.publish.budget import Budget

__all__ = ["guard_markdown", "notes_markdown"]


def _flat(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _live_lines(budget: Budget, live: list[dict[str, Any]], reserve: int = 0) -> None:
    budget.add("## Recent exchanges (uncompressed)")
    if not live:
        budget.add("_none_")
    # Newest last, but when the budget is short keep the newest: fill from the end.
    lines = [f"- #{t['id']} [{t['role']}] {t['created_at']}: {_flat(t['content'], 300)}"
             for t in live]
    kept: list[str] = []
    room = budget.max_chars - 80 - budget.used - reserve
    for line in reversed(lines):
        if len(line) + 1 > room:
            budget.omitted += 1
            continue
        kept.append(line)
        room -= len(line) + 1
    for line in reversed(kept):
        budget.add(line)


def _brief_lines(budget: Budget, briefs: list[dict[str, Any]], reserve: int) -> None:
    for b in briefs:
        score = f", score {b['score']:.4f}" if b.get("score") is not None else ""
        ids = ", ".join(f"#{i}" for i in b["source_ids"])
        budget.add(f"### Brief {b['id']} (tier-{b['tier']}{score}) — sources {ids}",
                   reserve=reserve)
        for line in b["body"].splitlines():
            budget.add(line, reserve=reserve)


def notes_markdown(state: State, cfg: Mapping[str, Any]) -> Writes:
    session, live = state.get("session"), state.get("live") or []
    budget = Budget(state.get("max_chars"))
    budget.add(f"# Running notes — session {session!r}")
    if state.get("session_row") is None:
        budget.add("_No turns recorded in this session yet._")
        return {"markdown": budget.text()}
    # Live turns are the most recent context; keep room for a few of them.
    reserve = min(1_500, sum(len(t["content"]) for t in live[-5:]) + 200)
    budget.add("## Milestones", reserve=reserve)
    milestones = state.get("milestones") or []
    if not milestones:
        budget.add("_none_", reserve=reserve)
    for m in milestones:
        where = f" (brief {m['brief_id']})" if m["brief_id"] else ""
        budget.add(f"- #{m['exchange_id']} **{m['label']}** [{m['role']}]{where}: "
                   f"{_flat(m['excerpt'], 160)}", reserve=reserve)
    flags = state.get("flags") or []
    if flags:  # only when there are any: most sessions have none
        budget.add("## Reasoning-drift flags (NAFE, heuristic — not blockers)", reserve=reserve)
        for f in flags:
            budget.add(f"- #{f['exchange_id']} {f['signature']}: “{_flat(f['span'], 120)}”",
                       reserve=reserve)
    budget.add("## Compressed briefs", reserve=reserve)
    briefs = state.get("briefs") or []
    if not briefs:
        budget.add("_none_", reserve=reserve)
    _brief_lines(budget, briefs, reserve)
    _live_lines(budget, live)
    return {"markdown": budget.text()}


def guard_markdown(state: State, cfg: Mapping[str, Any]) -> Writes:
    query, live = state.get("query"), state.get("live") or []
    budget = Budget(state.get("max_chars"))
    about = f" for {query['text']!r}" if query["text"] else " (newest; no query given)"
    budget.add(f"# Compaction briefing — session {state.get('session')!r}")
    if query["session_row"] is None:
        budget.add("_No turns recorded in this session yet._")
        return {"markdown": budget.text()}
    reserve = min(2_000, sum(len(t["content"]) for t in live[-5:]) + 200)
    briefs = state.get("briefs") or []
    budget.add(f"## Top {len(briefs)} briefs{about}", reserve=reserve)
    if not briefs:
        budget.add("_none_", reserve=reserve)
    _brief_lines(budget, briefs, reserve)
    _live_lines(budget, live)
    return {"markdown": budget.text()}
