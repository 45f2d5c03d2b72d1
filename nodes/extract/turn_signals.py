"""Node: decisions and blockers of the turn being ingested."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from nodes.extract.signals import blockers, decisions

__all__ = ["turn_signals"]


def turn_signals(state: State, cfg: Mapping[str, Any]) -> Writes:
    text = state.get("turn")["content"]
    patterns = state.ctx.patterns
    return {"decisions": decisions(text, patterns), "blockers": blockers(text, patterns)}
