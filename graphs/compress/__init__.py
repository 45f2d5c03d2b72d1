"""compress: fold a session's oldest uncompressed turns into a provenance-tracked brief.

load the batch → extract the brief's text → claim the turns atomically; go again while
enough uncompressed turns remain (or another process won the claim).
"""

from typing import Any

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

__all__ = ["DEFINITION", "OVERDUE_CHANNELS", "overdue_loop"]

# The channels of ``overdue_loop``.
OVERDUE_CHANNELS = ("after_session", "session_row", "sessions_compressed", "batch", "draft",
                    "rounds", "again", "briefs")


def overdue_loop(then: str, *, note: str | None = None
                 ) -> tuple[dict[str, Any], list[dict[str, str]], list[dict[str, Any]]]:
    """The stages that compress every session holding a full batch of uncompressed turns:
    the next such session [→ ``note`` it] → load its batch → extract the brief → claim
    the turns; again while the session still holds a full batch, then the next session;
    on to ``then`` when there is none. Entered at ``overdue``. Returns the nodes, the
    edges and the conditional edges (recover, and sync after applying turns)."""
    nodes = {"overdue": {"type": "overdue_session"},
             **({"note": {"type": note}} if note else {}),
             "batch": {"type": "compression_batch"},
             "draft": {"type": "brief_draft"},
             "claim": {"type": "claimed_brief"}}
    edges = chain(*(("note",) if note else ()), "batch", "draft", "claim")
    routes = [
        {"from": "overdue", "condition": "has_session",
         "routes": {"yes": "note" if note else "batch", "default": then}},
        {"from": "claim", "condition": "compress_again",
         "routes": {"again": "batch", "default": "overdue"}},
    ]
    return nodes, edges, routes


DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "compress",
    "channels": channels("session_row", "batch", "draft", "rounds", "again",
                         append=("briefs",)),
    "nodes": {
        "batch": {"type": "compression_batch"},
        "draft": {"type": "brief_draft"},
        "claim": {"type": "claimed_brief"},
    },
    "edges": chain(START, "batch", "draft", "claim"),
    "conditional_edges": [
        {"from": "claim", "condition": "compress_again",
         "routes": {"again": "batch", "default": END}},
    ],
}
