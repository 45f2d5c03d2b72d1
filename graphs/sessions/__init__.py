"""sessions: one page of recorded sessions, newest activity first (`stenographer sessions`).

validate the page → sessions with turn, brief and milestone counts → reply (the page and
its text). The first two
nodes are the inspector's (graphs/inspector ``inspect_sessions``): one listing, two views.
"""

from graphs.definition import channels, linear

DEFINITION = linear(
    "sessions",
    channels("request", "listing", "sessions", "total", "counts", "reply"),
    validate={"type": "checked_listing", "default_limit": 50},
    load="session_list",
    reply="sessions_text",
)
