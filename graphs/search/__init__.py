"""search: rank recorded turns for a query (stenographer_query_history).

validate → keyword expression → keyword candidates (FTS5 BM25 over the turn, its
neighbours' words and its date) → provider backlog → hashed-vector candidates →
provider candidates → score fusion → one page with provenance → reply. The mode picks
the branch: keyword skips every vector stage, semantic skips the keyword index. The
provider stages do nothing unless STENO_EMBEDDINGS is set.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "search",
    "channels": channels("request", "query", "fts", "keyword", "semantic", "provider",
                         "embedded", "ranked", "hits", "next_cursor", "total", "reply",
                         append=("notes",)),
    "nodes": {
        "validate": {"type": "checked_query"},
        "terms": {"type": "keyword_query"},
        "keyword": {"type": "keyword_candidates"},
        "backlog": {"type": "embedded_backlog"},
        "vector": {"type": "vector_candidates"},
        "provider": {"type": "provider_candidates"},
        "fuse": {"type": "fused_hits"},
        "answers": {"type": "answered_hits"},
        "page": {"type": "hit_page"},
        "reply": {"type": "search_reply"},
    },
    "edges": chain(START, "validate") + chain("terms", "keyword")
    + chain("backlog", "vector", "provider", "fuse", "answers", "page", "reply", END),
    "conditional_edges": [
        {"from": "validate", "condition": "search_mode",
         "routes": {"semantic": "backlog", "default": "terms"}},
        {"from": "keyword", "condition": "search_mode",
         "routes": {"keyword": "fuse", "default": "backlog"}},
    ],
}
