"""The schema's operations (``store.schema``) in PostgreSQL's SQL, and what a new
PostgreSQL database needs besides.

Table and column names are the SQLite store's, so that the store modules' statements
run on both. Integers are BIGINT, reals DOUBLE PRECISION, bytes BYTEA, an id the
database gives out a BIGSERIAL; what SQLite keeps in virtual tables lives here in
ordinary ones: ``exchanges_fts`` holds one weighted ``tsvector`` a turn (GIN-indexed)
and ``exchange_vectors`` a pgvector ``halfvec`` (HNSW-indexed, inner product, until
the ``scale_tuning`` migration drops the index: each process searches its own copy).

``store.migrations`` runs the steps under a transaction-level advisory lock, so several
processes opening one new database at once apply each exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from store import schema
from store.schema import Type
from store.sql import Conn

__all__ = ["CREATE_MIGRATIONS_TABLE", "LOCK_MIGRATIONS", "MIGRATION_LOCK", "initial", "step"]

MIGRATION_LOCK = 0x5354454E4F  # "STENO": the advisory lock key of schema changes
LOCK_MIGRATIONS = "SELECT pg_advisory_xact_lock(?)"

CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations(
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at DOUBLE PRECISION NOT NULL
)"""

# SQLite functions the shared statements use: group_concat(), json_each(),
# json_group_array(), instr() and two-argument max() and min().
SQLITE_FUNCTIONS = """
CREATE FUNCTION group_concat_step(acc TEXT, value anyelement) RETURNS TEXT
  LANGUAGE sql IMMUTABLE PARALLEL SAFE  -- polymorphic: the body must be a quoted string
  AS $$ SELECT CASE WHEN value IS NULL THEN acc WHEN acc IS NULL THEN value::text
                    ELSE acc || ',' || value::text END $$;
CREATE AGGREGATE group_concat(anyelement) (SFUNC = group_concat_step, STYPE = TEXT);
-- json_each(text): the elements of a JSON array as text (the statements cast id lists).
CREATE FUNCTION json_each(doc TEXT) RETURNS TABLE(value TEXT)
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT jsonb_array_elements_text(doc::jsonb) $$;
CREATE FUNCTION json_group_array_final(items anycompatiblearray) RETURNS TEXT
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT array_to_json(items)::text $$;
CREATE AGGREGATE json_group_array(anycompatible) (
  SFUNC = array_append, STYPE = anycompatiblearray, INITCOND = '{}',
  FINALFUNC = json_group_array_final);
CREATE FUNCTION instr(haystack TEXT, needle TEXT) RETURNS BIGINT
  LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN strpos(haystack, needle);
CREATE FUNCTION max(a DOUBLE PRECISION, b DOUBLE PRECISION) RETURNS DOUBLE PRECISION
  LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN greatest(a, b);
CREATE FUNCTION min(a DOUBLE PRECISION, b DOUBLE PRECISION) RETURNS DOUBLE PRECISION
  LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN least(a, b);
CREATE FUNCTION max(a BIGINT, b BIGINT) RETURNS BIGINT
  LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN greatest(a, b);
CREATE FUNCTION min(a BIGINT, b BIGINT) RETURNS BIGINT
  LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN least(a, b);
"""


class PgRenderer(schema.Renderer):
    types: ClassVar[Mapping[Type, str]] = {
        Type.INT: "BIGINT", Type.REAL: "DOUBLE PRECISION", Type.TEXT: "TEXT", Type.BYTES: "BYTEA"}

    def __init__(self, vector_dim: int) -> None:
        self.vector_dim = int(vector_dim)  # of the store's hashed vectors

    def key(self, c: schema.Column) -> str:
        # A sequence gives the ids out, never twice.
        return "BIGSERIAL PRIMARY KEY" if c.generated else super().key(c)

    def index_keys(self, i: schema.Index) -> tuple[str, ...]:
        return (*i.keys, i.then_id) if i.then_id else i.keys

    def keyword_table(self, k: schema.KeywordTable) -> str:
        # The fields' weights: the turn's words A, its month and year B, the words of
        # the turns before it C (store.postgres.dialect); the session is a column.
        return f"""
            CREATE TABLE {k.name}(
              rowid BIGINT PRIMARY KEY,
              session_id BIGINT NOT NULL,
              doc TSVECTOR NOT NULL
            );
            CREATE INDEX {k.name}_doc ON {k.name} USING gin(doc);
            CREATE INDEX {k.name}_by_session ON {k.name}(session_id, rowid)"""

    def vector_table(self, v: schema.VectorTable) -> str:
        return f"""
            CREATE TABLE {v.name}(
              rowid BIGINT PRIMARY KEY,
              session_id BIGINT NOT NULL,
              embedding halfvec({self.vector_dim}) NOT NULL
            );
            CREATE INDEX {v.name}_by_session ON {v.name}(session_id, rowid);
            CREATE INDEX {v.name}_hnsw ON {v.name} USING hnsw (embedding halfvec_ip_ops);
            {schema.vector_dim_row(self.vector_dim)}"""

    def new_store_id(self) -> str:
        return ("INSERT INTO meta(key, value) "
                "VALUES ('store_id', replace(gen_random_uuid()::text, '-', '')) "
                "ON CONFLICT (key) DO NOTHING")


def _run(conn: Conn, op: schema.Operation, renderer: PgRenderer) -> None:
    if isinstance(op, schema.Data):
        op.run(conn)  # old row versions are reclaimed by the next vacuum
        return
    conn.execute(renderer.render(op))


def step(operations: Sequence[schema.Operation]) -> Callable[[Conn, int], None]:
    """One migration's operations run in order (in the migrations' transaction);
    ``vector_dim``: the dimension of the store's hashed vectors."""
    def run(conn: Conn, vector_dim: int) -> None:
        renderer = PgRenderer(vector_dim)
        for op in operations:
            _run(conn, op, renderer)
    return run


def initial(earlier: Sequence[schema.Operation]) -> Callable[[Conn, int], None]:
    """The first step of a new database: pgvector, the schema that the ``earlier``
    operations leave, created at once (their ``Data`` steps have no rows to carry),
    and the SQLite functions the statements use."""
    create = step(schema.final_schema(earlier))

    def run(conn: Conn, vector_dim: int) -> None:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        create(conn, vector_dim)
        conn.execute(SQLITE_FUNCTIONS)
    return run
