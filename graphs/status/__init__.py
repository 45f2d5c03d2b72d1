"""status: store counts, capture and delivery progress, and the coordination bus
(stenographer_capture_status)."""

from graphs.definition import channels, linear

DEFINITION = linear(
    "status",
    channels("request", "status", "text", "reply"),
    status="capture_status",
    bus="bus_status",
)
