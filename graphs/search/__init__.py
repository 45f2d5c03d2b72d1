"""search: rank recorded turns for a query (stenographer_query_history).

validate → keyword expression → keyword candidates (FTS5 BM25) → vector candidates →
reciprocal rank fusion → one page with provenance → reply. The mode picks the branch:
keyword skips the vectors, semantic skips the keyword index.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "search",
    "channels": channels("request", "query", "fts", "keyword", "semantic", "ranked", "hits",
                         "next_cursor", "total", "text", append=("notes",)),
    "nodes": {
        "validate": {"type": "checked_query"},
        "terms": {"type": "keyword_query"},
        "keyword": {"type": "keyword_candidates"},
        "vector": {"type": "vector_candidates"},
        "fuse": {"type": "fused_hits"},
        "page": {"type": "hit_page"},
        "reply": {"type": "search_reply"},
    },
    "edges": chain(START, "validate") + chain("terms", "keyword")
    + chain("vector", "fuse", "page", "reply", END),
    "conditional_edges": [
        {"from": "validate", "condition": "search_mode",
         "routes": {"semantic": "vector", "default": "terms"}},
        {"from": "keyword", "condition": "search_mode",
         "routes": {"keyword": "fuse", "default": "vector"}},
    ],
}
