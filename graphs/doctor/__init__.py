"""doctor: check that this machine can run the server (``stenographer doctor``).

Python version → the settings (read at the edge; the request says where the data lives
or why the settings are invalid) → the SQLite build (FTS5) → the sqlite-vec extension
→ with invalid settings, what cannot be checked without them; otherwise the data
directory → writable → free disk → the store and its migrations, or with a database
URL the PostgreSQL database (connection, server version, pgvector, schema version) →
the report. Each stage appends its checks; the graph runs without a run context (no
store: it must work exactly when the store cannot be opened) and writes nothing.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

__all__ = ["DEFINITION"]

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "doctor",
    "channels": channels("request", "data_dir", "database_url", "reply", append=("checks",)),
    "nodes": {
        "python": {"type": "python_check"},
        "settings": {"type": "settings_check"},
        "fts5": {"type": "sqlite_check"},
        "vec_extension": {"type": "sqlite_vec_check"},
        "unchecked": {"type": "settings_unchecked"},
        "data_dir": {"type": "data_dir_check"},
        "writable": {"type": "writable_check"},
        "disk": {"type": "disk_check"},
        "store": {"type": "store_checks"},
        "postgres": {"type": "postgres_checks"},
        "reply": {"type": "setup_report"},
    },
    "edges": chain(START, "python", "settings", "fts5", "vec_extension")
    + chain("data_dir", "writable", "disk") + chain("unchecked", "reply")
    + chain("store", "reply") + chain("postgres", "reply") + chain("reply", END),
    "conditional_edges": [
        {"from": "vec_extension", "condition": "settings_valid",
         "routes": {"valid": "data_dir", "default": "unchecked"}},
        {"from": "disk", "condition": "store_dialect",
         "routes": {"postgresql": "postgres", "default": "store"}},
    ],
}
