"""status: store counts, capture and delivery progress, and the coordination bus
(stenographer_capture_status)."""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "status",
    "channels": channels("request", "status", "text", "reply"),
    "nodes": {"status": {"type": "capture_status"}, "bus": {"type": "bus_status"}},
    "edges": chain(START, "status", "bus", END),
}
