"""trace: read stored stage traces — one run by id (`trace`), or the recent runs (`runs`)."""

from graphs.definition import channels, linear

DEFINITION = linear(
    "trace",
    channels("request", "trace"),
    load="stored_trace",
)

RUNS = linear(
    "runs",
    channels("request", "runs"),
    load="recent_traces",
)
