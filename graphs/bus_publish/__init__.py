"""bus_publish: publish new turns to the coordination bus as ``STENO_EXCHANGE`` events
through the sync outbox, batch after batch until the outbox is drained or a batch fails.

the bus as destination → { the outbox's next batch after the ``outbox:bus`` cursor, as
events → insert those not on the bus yet (one bus transaction) → on success move the
cursor (acked_delivery), on failure record the error on it (failed_delivery) → add the
batch up } while a batch went through → reply. A failure ends the run; a server's
scheduler backs off before the next one (stenographer.bus).
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

_CURSOR = {"kind": "outbox:bus"}

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "bus_publish",
    "channels": channels("request", "peer", "outgoing", "events", "delivery", "cursor",
                         "totals", "reply"),
    "nodes": {
        "validate": {"type": "bus_destination"},
        "outbox": {"type": "outgoing_events"},
        "deliver": {"type": "published_events"},
        "ack": {"type": "acked_delivery", **_CURSOR},
        "failed": {"type": "failed_delivery", "direction": "outbox", **_CURSOR},
        "tally": {"type": "bus_totals"},
        "reply": {"type": "bus_publish_reply"},
    },
    "edges": chain(START, "validate", "outbox") + chain("ack", "tally")
    + chain("failed", "tally") + chain("reply", END),
    "conditional_edges": [
        {"from": "outbox", "condition": "has_outgoing",
         "routes": {"yes": "deliver", "default": "tally"}},
        {"from": "deliver", "condition": "delivered",
         "routes": {"ok": "ack", "default": "failed"}},
        {"from": "tally", "condition": "more_batches",
         "routes": {"more": "outbox", "default": "reply"}},
    ],
}

# A large outbox loops once per batch.
MAX_STEPS = 10_000_000
