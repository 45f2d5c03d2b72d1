"""Node: the ingest reply, whose first line stays compatible with the original server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes

__all__ = ["ingest_reply"]


def ingest_reply(state: State, cfg: Mapping[str, Any]) -> Writes:
    turn, rec = state.get("turn"), state.get("recorded")
    decisions, blockers = state.get("decisions") or [], state.get("blockers") or []
    briefs = state.get("briefs") or []
    if rec["duplicate"]:
        text = f"Already captured #{rec['exchange_id']} (source_key {turn['source_key']!r})"
        decisions, blockers = [], []
    else:
        text = (
            f"Ingested [{turn['role']}] #{rec['exchange_id']} ({len(turn['content'])} chars; "
            f"decisions: {len(decisions)}; blockers: {len(blockers)})"
        )
        for b in briefs:
            text += f" | Compressed {b['turns']} turns → brief {b['id']} (tier-{b['tier']})"
    return {
        "reply": {
            "text": text,
            "exchange_id": rec["exchange_id"],
            "session_id": turn["session"],
            "role": turn["role"],
            "chars": len(turn["content"]),
            "duplicate": rec["duplicate"],
            "decisions": decisions,
            "blockers": blockers,
            "compressed": briefs,
            "trace_id": turn["trace_id"],
        }
    }
