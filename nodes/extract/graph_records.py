"""Node: the entities, relations and provenance of one extraction batch.

Reads the batch's turns from the ``pending`` and ``window`` channels and writes the
records to ``records`` for the contract check and the publish stage (the graph runner
keeps these bulk values out of the engine's state).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.extract.entities import mentions_and_occurrences
from nodes.extract.relations import (
    PAIR_ENTITIES,
    WINDOW_ENTITIES,
    co_occurring,
    salient,
    typed_relations,
)
from store.graph_batches import BatchRecords, PendingTurn

__all__ = ["batch_records", "graph_records"]


def batch_records(turns: Sequence[PendingTurn], previous: Mapping[int, PendingTurn | None]
                  ) -> BatchRecords:
    """Records of ``turns`` (in id order per session); ``previous`` holds, per session,
    the turn just before the batch's first turn of that session (the window)."""
    out = BatchRecords(turns_read=len(turns))
    window: dict[int, tuple[int, Sequence[str]]] = {}
    for session_id, turn in previous.items():
        if turn is not None:
            found, _ = mentions_and_occurrences(turn.content)
            window[session_id] = (turn.id, salient(found, WINDOW_ENTITIES))
    aliases, edges, cursors = out.aliases, out.edges, out.cursors
    edge_turns, sessions = out.edge_turns, out.sessions
    add_entity_turn = out.entity_turns.append
    # A turn observes tens of pairs: they are counted by number (a key's number is its
    # place in ``names``; a pair's is ``lower << 32 | higher``), which hashes far faster
    # than a tuple of keys, and made edges once per distinct pair at the end.
    numbers: dict[str, int] = {}
    names: list[str] = []
    inside: dict[int, list[int]] = {}  # pair of a turn -> the turns observing it
    across: dict[tuple[str, str], list[int]] = {}  # pair -> turn, turn before, turn, ...
    for turn in turns:
        turn_id, session_id, content = turn.id, turn.session_id, turn.content
        found, occ = mentions_and_occurrences(content)
        cursors[session_id] = max(cursors.get(session_id, 0), turn_id)
        sessions[turn_id] = session_id
        for key, surface, kind, _ in found:
            alias = (key, surface, kind)
            aliases[alias] = aliases.get(alias, 0) + 1
            add_entity_turn((key, turn_id, session_id))
        keys = salient(found, max(WINDOW_ENTITIES, PAIR_ENTITIES))
        prev_id, prev_keys = window.get(session_id, (0, ()))
        if prev_keys:
            sessions[prev_id] = session_id
        mine, with_before = co_occurring(keys, prev_keys)
        paired = []
        for key in mine:
            number = numbers.get(key)
            if number is None:
                number = numbers[key] = len(names)
                names.append(key)
            paired.append(number)
        paired.sort()
        for i, low in enumerate(paired):
            high = low << 32
            for other in paired[i + 1:]:
                cited = inside.get(high | other)
                if cited is None:
                    inside[high | other] = [turn_id]
                else:
                    cited.append(turn_id)
        for pair in with_before:
            cited = across.get(pair)
            if cited is None:
                across[pair] = [turn_id, prev_id]
            else:
                cited += (turn_id, prev_id)
        speaker = found[0][0] if found and found[0][2] == "speaker" else None
        typed: set[tuple[str, str, str]] = set()
        for edge in typed_relations(content, occ, speaker):
            if edge not in typed:
                typed.add(edge)
                edges[edge] = edges.get(edge, 0) + 1
                edge_turns.setdefault(edge, []).append(turn_id)
        window[session_id] = (turn_id, keys[:WINDOW_ENTITIES])  # = salient(found, 3)
    for number, cited in inside.items():
        a, b = names[number >> 32], names[number & 0xFFFFFFFF]
        edge = (a, b, "co_occurs") if a < b else (b, a, "co_occurs")
        edges[edge] = len(cited)
        edge_turns[edge] = cited
    for (a, b), cited in across.items():  # each observation cites the turn before too
        edge = (a, b, "co_occurs")
        edges[edge] = edges.get(edge, 0) + len(cited) // 2
        edge_turns[edge] = edge_turns.get(edge, []) + cited
    return out


class GraphRecordsWrites(TypedDict):
    records: Any
    extracted: Any
    extracted_in: Any


@node
def graph_records(pending: Any, window: Any, lookahead: Any, lookahead_window: Any, *,
                  run: RunContext) -> GraphRecordsWrites:
    """The batch's records: the worker process's when it extracted exactly this batch
    ahead (``extracted_in``: "worker process"), else extracted here; the next batch, if the load
    stage read one, goes to the worker before this one is checked and written."""
    turns = pending
    prefetch = run.graph_prefetch
    records = None if prefetch is None else prefetch.take(turns, window)
    where = "this process" if records is None else "worker process"
    following = lookahead
    if prefetch is not None and following:
        prefetch.submit(following, lookahead_window)
    if records is None:
        records = batch_records(turns, window)
    return {"records": records, "extracted": {"entities": len({k for k, _, _ in records.aliases}),
                          "mentions": len(records.entity_turns),
                          "edges": len(records.edges),
                          "edge_turns": records.edge_turn_count()},
            "extracted_in": where}
