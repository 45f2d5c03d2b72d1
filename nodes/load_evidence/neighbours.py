"""Node: the turns just before the one being ingested, read once for every extractor
that borrows from them (the vector and the keyword index's context field)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from store.neighbours import previous_contents

__all__ = ["PREVIOUS_TURNS", "previous_turns"]

PREVIOUS_TURNS = 2  # as many as the most demanding reader uses (vectors, context field)


def previous_turns(state: State, cfg: Mapping[str, Any]) -> Writes:
    with state.ctx.store.read() as conn:
        previous = previous_contents(conn, state.get("turn")["session"], PREVIOUS_TURNS)
    return {"previous": previous}
