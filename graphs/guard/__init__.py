"""guard: the compaction briefing (stenographer_compact_guard).

validate → (with a query: keyword, hashed-vector and provider candidates among
compressed turns, fused, then briefs ranked by their hit turns; without: the newest
briefs) plus the live turns → Markdown within the budget.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "guard",
    "channels": channels("request", "query", "session", "max_chars", "fts", "keyword",
                         "semantic", "provider", "embedded", "ranked", "briefs", "live",
                         "reply", append=("notes",)),
    "nodes": {
        "validate": {"type": "checked_guard"},
        "terms": {"type": "keyword_query"},
        "keyword": {"type": "keyword_candidates", "compressed_only": True},
        "backlog": {"type": "embedded_backlog"},
        "vector": {"type": "vector_candidates", "compressed_only": True},
        "provider": {"type": "provider_candidates", "compressed_only": True},
        "fuse": {"type": "fused_hits"},
        "answers": {"type": "answered_hits", "compressed_only": True},
        "evidence": {"type": "guard_evidence"},
        "reply": {"type": "guard_markdown"},
    },
    "edges": chain(START, "validate")
    + chain("terms", "keyword", "backlog", "vector", "provider", "fuse", "answers", "evidence")
    + chain("evidence", "reply", END),
    "conditional_edges": [
        {"from": "validate", "condition": "has_query",
         "routes": {"yes": "terms", "default": "evidence"}},
    ],
}
