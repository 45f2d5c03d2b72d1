"""Node: the turns just before the one being ingested, read once for every extractor
that borrows from them (the vector and the keyword index's context field)."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import RunContext, node
from store.neighbours import previous_contents

__all__ = ["PREVIOUS_TURNS", "previous_turns"]

PREVIOUS_TURNS = 2  # as many as the most demanding reader uses (vectors, context field)


class PreviousTurnsWrites(TypedDict):
    previous: Any


@node
def previous_turns(turn: Any, *, run: RunContext) -> PreviousTurnsWrites:
    with run.store.read() as conn:
        previous = previous_contents(conn, turn["session"], PREVIOUS_TURNS)
    return {"previous": previous}
