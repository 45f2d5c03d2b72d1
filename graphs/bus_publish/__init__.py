"""bus_publish (one batch): publish new turns to the coordination bus as
``STENO_EXCHANGE`` events through the sync outbox.

the bus as destination → the outbox's next batch after the ``outbox:bus`` cursor, as
events → insert those not on the bus yet (one bus transaction) → on success move the
cursor (acked_delivery), on failure record the error on it (failed_delivery) → reply.
The driver (stenographer.bus) repeats it, with back-off while the bus is unavailable.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

_CURSOR = {"kind": "outbox:bus"}

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "bus_publish",
    "channels": channels("request", "peer", "outgoing", "events", "delivery", "cursor", "reply"),
    "nodes": {
        "validate": {"type": "bus_destination"},
        "outbox": {"type": "outgoing_events"},
        "deliver": {"type": "published_events"},
        "ack": {"type": "acked_delivery", **_CURSOR},
        "failed": {"type": "failed_delivery", "direction": "outbox", **_CURSOR},
        "reply": {"type": "bus_publish_reply"},
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
