"""Node: decisions and blockers of the turn being ingested."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.extract.signals import blockers, decisions

__all__ = ["turn_signals"]


class TurnSignalsWrites(TypedDict):
    decisions: Any
    blockers: Any


@node
def turn_signals(turn: Any, *, run: RunContext) -> TurnSignalsWrites:
    text = turn["content"]
    patterns = run.patterns
    return {"decisions": decisions(text, patterns), "blockers": blockers(text, patterns)}
