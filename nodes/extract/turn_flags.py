"""Node: NAFE reasoning-drift flags of the turn being ingested (assistant turns only).

Flags are heuristic notes about the assistant's reasoning, kept apart from decisions
and blockers: they never count as blockers and never change the brief tier.
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import node
from nodes.extract.nafe import nafe_flags_in

__all__ = ["nafe_flags"]

SCANNED_ROLES = ("assistant",)


class NafeFlagsWrites(TypedDict):
    flags: Any


@node
def nafe_flags(turn: Any) -> NafeFlagsWrites:
    if turn["role"] not in SCANNED_ROLES:
        return {"flags": []}
    return {"flags": [{"signature": f.signature, "span": f.span, "start": f.start,
                       "end": f.end} for f in nafe_flags_in(turn["content"])]}
