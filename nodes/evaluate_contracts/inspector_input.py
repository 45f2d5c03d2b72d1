"""Nodes: validate the inspector's read requests (listings and references by id)."""

from __future__ import annotations

import re
from typing import Any, TypedDict

from nodes.context import Cfg, node
from nodes.evaluate_contracts.inputs import check_int
from nodes.evaluate_contracts.requests import ListingRequest, parsed
from store.errors import InvalidInput

__all__ = ["checked_brief_ref", "checked_exchange_ref", "checked_listing"]

_GRAPH_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


class CheckedListingWrites(TypedDict):
    listing: dict[str, Any]


@node
def checked_listing(request: Any, *, cfg: Cfg) -> CheckedListingWrites:
    """A page of a listing: ``limit`` (1-200), ``offset``, an optional graph filter."""
    given = parsed(ListingRequest, request or {})
    limit = given.limit or cfg.get("default_limit", 50)
    offset = given.offset
    graph = given.graph or None
    if graph is not None and not _GRAPH_NAME.fullmatch(graph):
        raise InvalidInput("graph must be the name of a graph (lowercase letters, digits and "
                           "underscores, e.g. ingest, search, compress)")
    return {"listing": {"limit": limit, "offset": offset, "graph": graph,
                        "all_graphs": given.all_graphs}}


class CheckedExchangeRefWrites(TypedDict):
    exchange_id: Any


@node
def checked_exchange_ref(request: Any) -> CheckedExchangeRefWrites:
    req = request or {}
    return {"exchange_id": check_int("exchange_id", req.get("exchange_id"), 1, 2**63 - 1)}


class CheckedBriefRefWrites(TypedDict):
    brief_id: Any


@node
def checked_brief_ref(request: Any) -> CheckedBriefRefWrites:
    req = request or {}
    return {"brief_id": check_int("brief_id", req.get("brief_id"), 1, 2**63 - 1)}
