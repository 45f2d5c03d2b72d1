"""The SQLite dialect: what the store does differently on its default backend, a file
with FTS5 and sqlite-vec (``store.sqlite.dialect``)."""
