"""Node: decisions and blockers of the turn being ingested."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.extract.signals import signals

__all__ = ["turn_signals"]


class TurnSignalsWrites(TypedDict):
    decisions: Any
    blockers: Any


@node
def turn_signals(turn: Any, *, run: RunContext) -> TurnSignalsWrites:
    decisions, blockers = signals(turn["content"], run.patterns)
    return {"decisions": decisions, "blockers": blockers}
