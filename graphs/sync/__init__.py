"""sync: move the record between stores as bundles (nodes.bundles), by file or HTTP.

- ``sync_export``: validate → write the bundle (one read snapshot, pages) → reply.
- ``sync_import``: validate → verify the whole bundle (checksums, hash chains,
  manifest; nothing is applied from a bundle that fails) → apply its turns in
  transactions, idempotently → compress every session left with a full batch → reply.
- ``sync_push`` (one batch): validate → the outbox's next batch after the peer's cursor
  → POST it to the peer → on success move the cursor, on failure record the error →
  reply. The driver (stenographer.sync) repeats it, with backoff on transient errors.
- ``sync_pull`` (one batch): validate → GET the batch after the inbox cursor → verify →
  apply → compress → move the cursor → reply; a failed fetch is recorded.
- ``sync_failure``: record on a peer's cursor an error the driver saw (a pulled bundle
  that did not verify).

The HTTP server answers a peer's push with ``sync_import`` and its pull with
``sync_export`` (stenographer.http).
"""

from typing import Any

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

# An import of many sessions loops once per session with a full batch (and once per
# brief inside it).
MAX_STEPS = 10_000_000

_APPLY_CHANNELS = ("incoming", "bundle", "applied", "after_session", "session_row",
                   "sessions_compressed", "batch", "draft", "rounds", "again", "briefs")


def _apply_and_compress(then: str) -> tuple[dict[str, Any], list[dict[str, str]],
                                             list[dict[str, Any]]]:
    """verify → apply → { next overdue session → compress it } → ``then``."""
    nodes = {
        "verify": {"type": "verified_bundle"},
        "apply": {"type": "applied_bundle"},
        "overdue": {"type": "overdue_session"},
        "batch": {"type": "compression_batch"},
        "draft": {"type": "brief_draft"},
        "claim": {"type": "claimed_brief"},
    }
    edges = chain("verify", "apply", "overdue") + chain("batch", "draft", "claim")
    routes = [
        {"from": "overdue", "condition": "has_session",
         "routes": {"yes": "batch", "default": then}},
        {"from": "claim", "condition": "compress_again",
         "routes": {"again": "batch", "default": "overdue"}},
    ]
    return nodes, edges, routes


EXPORT = {
    "schema_version": SCHEMA_VERSION,
    "name": "sync_export",
    "channels": channels("request", "export", "exported", "reply"),
    "nodes": {
        "validate": {"type": "checked_export"},
        "write": {"type": "exported_bundle"},
        "reply": {"type": "export_reply"},
    },
    "edges": chain(START, "validate", "write", "reply", END),
}

_nodes, _edges, _routes = _apply_and_compress("reply")
IMPORT = {
    "schema_version": SCHEMA_VERSION,
    "name": "sync_import",
    "channels": channels("request", *_APPLY_CHANNELS, "reply"),
    "nodes": {"validate": {"type": "checked_import"}, **_nodes,
              "reply": {"type": "import_reply"}},
    "edges": chain(START, "validate", "verify") + _edges + chain("reply", END),
    "conditional_edges": _routes,
}

PUSH = {
    "schema_version": SCHEMA_VERSION,
    "name": "sync_push",
    "channels": channels("request", "peer", "outgoing", "delivery", "cursor", "reply"),
    "nodes": {
        "validate": {"type": "checked_peer"},
        "outbox": {"type": "outgoing_bundle"},
        "deliver": {"type": "delivered_bundle"},
        "ack": {"type": "acked_delivery"},
        "failed": {"type": "failed_delivery", "direction": "outbox"},
        "reply": {"type": "push_reply"},
    },
    "edges": chain(START, "validate", "outbox") + chain("ack", "reply")
    + chain("failed", "reply") + chain("reply", END),
    "conditional_edges": [
        {"from": "outbox", "condition": "has_outgoing",
         "routes": {"yes": "deliver", "default": "reply"}},
        {"from": "deliver", "condition": "delivered",
         "routes": {"ok": "ack", "default": "failed"}},
    ],
}

_nodes, _edges, _routes = _apply_and_compress("ack")
PULL = {
    "schema_version": SCHEMA_VERSION,
    "name": "sync_pull",
    "channels": channels("request", "peer", "delivery", "cursor", *_APPLY_CHANNELS, "reply"),
    "nodes": {
        "validate": {"type": "checked_peer"},
        "fetch": {"type": "fetched_bundle"},
        **_nodes,
        "ack": {"type": "acked_pull"},
        "failed": {"type": "failed_delivery", "direction": "inbox"},
        "reply": {"type": "pull_reply"},
    },
    "edges": chain(START, "validate", "fetch") + _edges + chain("ack", "reply")
    + chain("failed", "reply") + chain("reply", END),
    "conditional_edges": [
        {"from": "fetch", "condition": "delivered",
         "routes": {"ok": "verify", "default": "failed"}},
        *_routes,
    ],
}

FAILURE = {
    "schema_version": SCHEMA_VERSION,
    "name": "sync_failure",
    "channels": channels("request", "peer", "delivery", "cursor"),
    "nodes": {
        "validate": {"type": "checked_delivery_error"},
        "record": {"type": "failed_delivery"},
    },
    "edges": chain(START, "validate", "record", END),
}

DEFINITIONS = [EXPORT, IMPORT, PUSH, PULL, FAILURE]
LOOPING = ("sync_import", "sync_pull")
