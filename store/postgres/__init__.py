"""The PostgreSQL backend: the same store interface on a shared server.

Its store, connections and dialect are imported only when ``STENO_DATABASE_URL`` names
a PostgreSQL database; they need the optional ``postgres`` extra (psycopg 3 and its
pool). Its schema is the one migration list's (``store.migrations``), rendered in
PostgreSQL's SQL by ``schema``.
"""
