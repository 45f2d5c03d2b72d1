"""The PostgreSQL backend: the same store interface on a shared server.

Imported only when ``STENO_DATABASE_URL`` names a PostgreSQL database; it needs the
optional ``postgres`` extra (psycopg 3 and its pool).
"""
