"""sessions: one page of recorded sessions, newest activity first (`stenographer sessions`).

validate the page → sessions with turn, brief and milestone counts → text. The first two
nodes are the inspector's (graphs/inspector ``inspect_sessions``): one listing, two views.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "sessions",
    "channels": channels("request", "listing", "sessions", "total", "counts", "text"),
    "nodes": {
        "validate": {"type": "checked_listing", "default_limit": 50},
        "load": {"type": "session_list"},
        "reply": {"type": "sessions_text"},
    },
    "edges": chain(START, "validate", "load", "reply", END),
}
