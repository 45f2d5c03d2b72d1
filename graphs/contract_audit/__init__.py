"""contract_audit: check that the store keeps its promises, reading it in bounded pages.

validate → resolve the scope (whole store or one session) → loop { load one page of
evidence → evaluate the contracts on it } until every pass is read → publish the report
(per contract: pass/fail, counts, violating ids) → reply (the report). Read-only.
"""

from typing import Any

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

__all__ = ["CHANNELS", "DEFINITION", "MAX_STEPS", "audit_stages"]

# One page is two steps; a million-turn store takes about 600 pages of 5,000 records.
MAX_STEPS = 10_000_000

CHANNELS = ("request", "audit", "position", "batch", "findings", "carry", "pages", "report")


def audit_stages(prefix: str = "", then: str = END
                 ) -> tuple[dict[str, Any], list[dict[str, str]], list[dict[str, Any]]]:
    """The audit's nodes (names with ``prefix``), edges and loop, from
    ``prefix + "validate"`` to ``then``: another graph (migrate) inlines them, since an
    embedded subgraph runs at most the engine's default number of steps."""
    names = {n: prefix + n for n in ("validate", "scope", "evidence", "contracts", "report")}
    nodes = {
        names["validate"]: {"type": "checked_audit"},
        names["scope"]: {"type": "audit_scope"},
        names["evidence"]: {"type": "audit_batch", "batch": 5_000},
        names["contracts"]: {"type": "audit_findings"},
        names["report"]: {"type": "audit_report"},
    }
    edges = chain(names["validate"], names["scope"], names["evidence"], names["contracts"]) \
        + chain(names["report"], then)
    routes = [{"from": names["contracts"], "condition": "audit_more",
               "routes": {"more": names["evidence"], "default": names["report"]}}]
    return nodes, edges, routes


_nodes, _edges, _routes = audit_stages(then="reply")
DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "contract_audit",
    "channels": channels(*CHANNELS, "reply"),
    "nodes": {**_nodes, "reply": {"type": "audit_reply"}},
    "edges": chain(START, "validate") + _edges + chain("reply", END),
    "conditional_edges": _routes,
}
