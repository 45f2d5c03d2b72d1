"""Nodes: validate GraphRAG requests, and check a batch's provenance before it is
written (every entity and edge cites turns of the batch that name it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import check_int, check_session_id, check_text, check_time
from nodes.evaluate_contracts.requests import (
    MAX_QUERY_CHARS,
    GraphExportRequest,
    GraphExtractRequest,
    GraphQueryRequest,
    GraphResetRequest,
    parsed,
)
from nodes.extract.entities import mentions
from store.errors import InvalidInput, StoreError
from store.exchanges import session_row_id
from store.graph_batches import BatchRecords

__all__ = [
    "checked_community_ref",
    "checked_graph_batch",
    "checked_graph_export",
    "checked_graph_query",
    "checked_graph_reset",
    "graph_batch_contract",
]


def _session_row(run: RunContext, session: Any) -> tuple[str | None, int | None]:
    """(session name, row id); an unknown session has row id -1 (matches nothing)."""
    if session is None or session == "":
        return None, None
    name = check_session_id(session)
    with run.store.read() as conn:
        row = session_row_id(conn, name)
    return name, -1 if row is None else row


class CheckedGraphBatchWrites(TypedDict):
    batch_request: dict[str, Any]


@node
def checked_graph_batch(request: Any, *, run: RunContext) -> CheckedGraphBatchWrites:
    given = parsed(GraphExtractRequest, request)
    session = given.session_id
    return {"batch_request": {
        "batch_size": given.batch_size or run.settings.graphrag_batch,
        "session": None if not session else check_session_id(session),
        "since": check_time("since", given.since)}}


class CheckedGraphQueryWrites(TypedDict):
    graph_query: Any


@node
def checked_graph_query(request: Any, *, run: RunContext) -> CheckedGraphQueryWrites:
    given = parsed(GraphQueryRequest, request or {})
    text = check_text("query", given.query, max_chars=MAX_QUERY_CHARS)
    cross, session = given.cross_session, given.session_id
    if not cross and not session:
        raise InvalidInput("session_id is required unless cross_session is true")
    name, row = _session_row(run, None if cross else session)
    return {"graph_query": {
        "text": text, "session": name, "session_row": row,
        "hops": given.hops, "limit": given.limit}}


class CheckedCommunityRefWrites(TypedDict):
    community_id: Any


@node
def checked_community_ref(request: Any) -> CheckedCommunityRefWrites:
    req = request or {}
    return {"community_id": check_int("community_id", req.get("community_id"), 1, 2**63 - 1)}


class CheckedGraphExportWrites(TypedDict):
    export: dict[str, Any]


@node
def checked_graph_export(request: Any) -> CheckedGraphExportWrites:
    return {"export": {"format": parsed(GraphExportRequest, request).format}}


class CheckedGraphResetWrites(TypedDict):
    confirmed: bool


@node
def checked_graph_reset(request: Any) -> CheckedGraphResetWrites:
    """A reset deletes the derived graph: it must be confirmed."""
    if not parsed(GraphResetRequest, request).confirm:
        raise InvalidInput("resetting deletes the derived graph (entities, edges, "
                           "communities; the turns stay); call again with confirm=true")
    return {"confirmed": True}


class GraphBatchContractWrites(TypedDict):
    provenance: Any


@node
def graph_batch_contract(pending: Any, window: Any, records: Any) -> GraphBatchContractWrites:
    """Every entity row cites a turn of the batch that contains one of its surface
    forms; every edge's turns are batch turns (or the window's turn before) whose
    entities include its ends. A violation is a bug: nothing of the batch is written."""
    turns, previous = pending, window
    text = {t.id: t.content for t in turns}
    text.update({t.id: t.content for t in previous.values() if t is not None})
    _check_provenance(records, text)
    return {"provenance": {"entity_turns": len(records.entity_turns),
                           "edge_turns": records.edge_turn_count(), "checked": True}}


def _check_provenance(records: BatchRecords, text: Mapping[int, str]) -> None:
    surfaces: dict[str, set[str]] = {}
    for key, surface, _kind in records.aliases:
        surfaces.setdefault(key, set()).add(surface.casefold())
    folded: dict[int, str] = {}
    naming: dict[str, set[int]] = {}  # key -> the turns whose entities include it
    for key, exchange_id, _ in records.entity_turns:
        lowered = folded.get(exchange_id)
        if lowered is None:
            if exchange_id not in text:
                raise StoreError(f"graphrag: entity {key!r} cites turn #{exchange_id} "
                                 "outside the batch", exchange_id=exchange_id)
            lowered = folded[exchange_id] = text[exchange_id].casefold()
        for surface in surfaces[key]:
            if surface in lowered:
                break
        else:
            raise StoreError(f"graphrag: entity {key!r} cites turn #{exchange_id}, which "
                             "does not name it", exchange_id=exchange_id)
        turns = naming.get(key)
        if turns is None:
            naming[key] = {exchange_id}
        else:
            turns.add(exchange_id)
    # A turn no entity row cites (the window's turn before the batch) names what it names.
    for exchange_id in text.keys() - folded.keys():
        for found in mentions(text[exchange_id]):
            naming.setdefault(found[0], set()).add(exchange_id)
    nobody: set[int] = set()
    for edge, cited in records.edge_turns.items():
        # Set differences check a whole edge at C speed; any turn left over is a fault.
        if edge not in records.edges or set(cited).difference(
                naming.get(edge[0], nobody)).difference(naming.get(edge[1], nobody)):
            _refuse_edge(edge, cited, text, naming, edge in records.edges)


def _refuse_edge(edge: tuple[str, str, str], cited: list[int], text: Mapping[int, str],
                 naming: Mapping[str, set[int]], stored: bool) -> None:
    """Raise for the first turn of ``cited`` that cannot support ``edge``."""
    src, dst, kind = edge
    for exchange_id in cited:
        if exchange_id not in text:
            raise StoreError(f"graphrag: edge {src!r}-{kind}-{dst!r} cites turn "
                             f"#{exchange_id} outside the batch", exchange_id=exchange_id)
        if not stored or (exchange_id not in naming.get(src, ())
                          and exchange_id not in naming.get(dst, ())):
            raise StoreError(f"graphrag: edge {src!r}-{kind}-{dst!r} cites turn "
                             f"#{exchange_id}, which names neither end",
                             exchange_id=exchange_id)
