"""sync: move the record between stores as bundles (nodes.bundles), by file or HTTP.

- ``sync_export``: validate → write the bundle (one read snapshot, pages) → reply.
- ``sync_import``: validate → verify the whole bundle (checksums, hash chains,
  manifest; nothing is applied from a bundle that fails) → apply its turns in
  transactions, idempotently, through the batch path's node functions → compress the
  sessions it left with a full batch (one stage) → reply.
- ``sync_push``: validate → { a spool file → the outbox's next batch after the peer's
  cursor → POST it to the peer → move the cursor → remove the file → add it up } while
  a batch went through → reply.
- ``sync_pull``: validate → { a spool file → GET the batch after the inbox cursor and
  verify it → apply → compress → move the cursor → remove the file → add it up } while
  the peer had a batch → reply.

In both, the node that talks to the peer (``deliver``, ``fetch``) raises a failure; a
transient one (unreachable, timeout, 429 or 5xx, a pulled bundle that did not verify)
is retried by the engine's retry policy on that node, ``STENO_SYNC_RETRIES`` times with
back-off (set when the application opens, stenographer.app). A failure left after that
takes the failure edge: the error is recorded on the peer's cursor and the run ends
with what went through so far. The cursor moves only after the peer acknowledged a
batch, so a run stopped at any moment — even SIGKILL — loses nothing.

The HTTP server answers a peer's push with ``sync_import`` and its pull with
``sync_export`` (stenographer.http).
"""

from typing import Any

from graphs.compress import OVERDUE_CHANNELS, overdue_loop
from graphs.definition import END, SCHEMA_VERSION, START, chain, channels, linear

# An import of many sessions loops once per session with a full batch (and once per
# brief inside it).
MAX_STEPS = 10_000_000

_APPLY_CHANNELS = ("incoming", "bundle", "applied", "due", *OVERDUE_CHANNELS)


def _apply_and_compress(then: str
                        ) -> tuple[dict[str, Any], list[dict[str, str]], list[dict[str, Any]]]:
    """apply → { next overdue session → compress it } → ``then``."""
    nodes, edges, routes = overdue_loop(then)
    return {"apply": {"type": "applied_bundle"}, **nodes}, chain("apply", "overdue") + edges, routes


EXPORT = linear(
    "sync_export",
    channels("request", "export", "exported", "reply"),
    validate="checked_export",
    write="exported_bundle",
    reply="export_reply",
)

# An import brings the derived keyword index up to date and compresses the sessions it
# filled after the whole bundle, each in one stage (the batch path's); a session left
# overdue before is the recover graph's.
IMPORT = linear(
    "sync_import",
    channels("request", "incoming", "bundle", "applied", "due", "after_session",
                         "rounds", "briefs", "sessions_compressed", "reply"),
    validate="checked_import",
    verify="verified_bundle",
    apply="applied_bundle",
    upkeep="batch_upkeep",
    compress="compressed_sessions",
    reply="import_reply",
)

ERRORS = "failures"  # the failure edges' error channel (nodes.publish.sync_batches)
NETWORK = {"sync_push": "deliver", "sync_pull": "fetch"}  # nodes with a retry policy


def _batch_loop(direction: str, network: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The nodes and routes every batch ends with: the failure edge's target, removing
    the spool file, adding the batch up, and round again while there is more."""
    nodes = {
        "failed": {"type": "failed_delivery", "errors": ERRORS,
                   "direction": "outbox" if direction == "push" else "inbox"},
        "remove": {"type": "removed_spool"},
        "tally": {"type": "sync_totals", "direction": direction, "network": network},
        "reply": {"type": "batches_reply", "direction": direction},
    }
    routes = [{"from": "tally", "condition": "more_batches",
               "routes": {"more": "spool", "default": "reply"}}]
    return nodes, routes


_loop_nodes, _loop_routes = _batch_loop("push", NETWORK["sync_push"])
PUSH = {
    "schema_version": SCHEMA_VERSION,
    "name": "sync_push",
    "channels": {**channels("request", "peer", "spool", "outgoing", "delivery", "cursor",
                            "totals", "reply", append=(ERRORS,))},
    "nodes": {
        "validate": {"type": "checked_peer"},
        "spool": {"type": "spooled_file", "prefix": "out"},
        "outbox": {"type": "outgoing_bundle"},
        "deliver": {"type": "delivered_bundle"},
        "ack": {"type": "acked_delivery"},
        **_loop_nodes,
    },
    "edges": chain(START, "validate", "spool", "outbox") + chain("deliver", "ack", "remove")
    + chain("failed", "remove") + chain("remove", "tally") + chain("reply", END),
    "conditional_edges": [
        {"from": "outbox", "condition": "has_outgoing",
         "routes": {"yes": "deliver", "default": "remove"}},
        *_loop_routes,
    ],
    "failure_edges": [{"from": "deliver", "to": "failed", "error_channel": ERRORS}],
}

_nodes, _edges, _routes = _apply_and_compress("ack")
_loop_nodes, _loop_routes = _batch_loop("pull", NETWORK["sync_pull"])
PULL = {
    "schema_version": SCHEMA_VERSION,
    "name": "sync_pull",
    "channels": channels("request", "peer", "spool", "delivery", "cursor", *_APPLY_CHANNELS,
                         "totals", "reply", append=(ERRORS,)),
    "nodes": {
        "validate": {"type": "checked_peer"},
        "spool": {"type": "spooled_file", "prefix": "in"},
        "fetch": {"type": "fetched_bundle"},
        **_nodes,
        "ack": {"type": "acked_pull"},
        **_loop_nodes,
    },
    "edges": chain(START, "validate", "spool", "fetch", "apply") + _edges
    + chain("ack", "remove") + chain("failed", "remove") + chain("remove", "tally")
    + chain("reply", END),
    "conditional_edges": _routes + _loop_routes,
    "failure_edges": [{"from": "fetch", "to": "failed", "error_channel": ERRORS}],
}

DEFINITIONS = [EXPORT, IMPORT, PUSH, PULL]
LOOPING = ("sync_import", "sync_push", "sync_pull")
