"""trace: read stored stage traces — one run by id (`trace`), or the recent runs (`runs`)."""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "trace",
    "channels": channels("request", "trace"),
    "nodes": {"load": {"type": "stored_trace"}},
    "edges": chain(START, "load", END),
}

RUNS = {
    "schema_version": SCHEMA_VERSION,
    "name": "runs",
    "channels": channels("request", "runs"),
    "nodes": {"load": {"type": "recent_traces"}},
    "edges": chain(START, "load", END),
}
