"""The PostgreSQL backend: the same store interface on a shared server.

Its store, connections and dialect are imported only when ``STENO_DATABASE_URL`` names
a PostgreSQL database; they need the optional ``postgres`` extra (psycopg 3 and its
pool). Its schema (``schema``) is plain statements, listed in ``store.migrations``
beside SQLite's.
"""
