"""briefing: what a host adds to the context when a session starts (``stenographer hook``).

validate → after a compaction or on resume: the session's milestones, decisions,
blockers and last user requests; at startup: those of the previous sessions of the
project directory; for an unknown session or another source: nothing → which blockers
a later turn fixed → (with a query made of the last requests: keyword candidates among
the compressed turns before them, briefs ranked by their hit turns as the compaction
guard ranks them) → Markdown within the briefing budget.

The guard's ranking without its vector lists: a hook answers from a fresh process
within the host's time budget, where the hashed vectors (a fuzzy signal worth 0.3 of a
keyword match at most) would cost numpy's import and a copy of every stored vector,
and an embedding provider a network call.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "briefing",
    "channels": channels("request", "session", "session_row", "source", "cwd", "max_chars",
                         "scope", "sessions", "query", "fts", "keyword", "ranked", "briefs",
                         "live", "briefing", append=("notes",)),
    "nodes": {
        "validate": {"type": "checked_briefing"},
        "session": {"type": "session_signals"},
        "project": {"type": "project_signals"},
        "status": {"type": "blocker_status"},
        "terms": {"type": "keyword_query", "words_only": True},
        "keyword": {"type": "keyword_candidates", "compressed_only": True},
        "fuse": {"type": "fused_hits"},
        "briefs": {"type": "guard_evidence"},
        "reply": {"type": "briefing_markdown"},
    },
    "edges": chain(START, "validate") + chain("session", "status") + chain("project", "status")
    + chain("terms", "keyword", "fuse", "briefs", "reply", END),
    "conditional_edges": [
        {"from": "validate", "condition": "briefing_scope",
         "routes": {"session": "session", "project": "project", "default": END}},
        {"from": "status", "condition": "has_query",
         "routes": {"yes": "terms", "default": "reply"}},
    ],
}
