"""The PostgreSQL schema: the SQLite store's tables in PostgreSQL types.

Table and column names are the SQLite store's, so that the store modules' statements
run on both; what SQLite keeps in virtual tables lives here in ordinary ones:
``exchanges_fts`` holds one weighted ``tsvector`` a turn (GIN-indexed) and
``exchange_vectors`` a pgvector ``halfvec`` (HNSW-indexed, inner product).

The steps here are PostgreSQL's side of the one migration list (``store.migrations``),
which runs them under a transaction-level advisory lock, so several processes opening
one new database at once apply each exactly once.
"""

from __future__ import annotations

from store.sql import Conn

__all__ = ["CREATE_MIGRATIONS_TABLE", "LOCK_MIGRATIONS", "MIGRATION_LOCK", "initial"]

MIGRATION_LOCK = 0x5354454E4F  # "STENO": the advisory lock key of schema changes
LOCK_MIGRATIONS = "SELECT pg_advisory_xact_lock(?)"

CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations(
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at DOUBLE PRECISION NOT NULL
)"""

# The full schema of SQLite migrations 1-11 in one step.
INITIAL = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE sessions(
  id BIGSERIAL PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  created_at DOUBLE PRECISION NOT NULL,
  last_at DOUBLE PRECISION NOT NULL,
  turns BIGINT NOT NULL DEFAULT 0,
  chain_head BYTEA,
  trace_id TEXT
);

CREATE TABLE briefs(
  id BIGSERIAL PRIMARY KEY,
  session_id BIGINT NOT NULL REFERENCES sessions(id),
  tier TEXT NOT NULL CHECK (tier IN ('A', 'B')),
  created_at DOUBLE PRECISION NOT NULL,
  first_exchange_id BIGINT NOT NULL,
  last_exchange_id BIGINT NOT NULL,
  turns BIGINT NOT NULL,
  body TEXT NOT NULL
);
CREATE INDEX briefs_by_session ON briefs(session_id, id);

CREATE TABLE exchanges(
  id BIGSERIAL PRIMARY KEY,
  session_id BIGINT NOT NULL REFERENCES sessions(id),
  role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
  created_at DOUBLE PRECISION NOT NULL,
  content TEXT NOT NULL,
  content_hash BYTEA NOT NULL,
  signals TEXT,
  brief_id BIGINT REFERENCES briefs(id),
  source_key TEXT,
  trace_id TEXT,
  chain_hash BYTEA
);
CREATE INDEX exchanges_by_session ON exchanges(session_id, id);
CREATE INDEX exchanges_live ON exchanges(session_id, id) WHERE brief_id IS NULL;
CREATE INDEX exchanges_by_brief ON exchanges(brief_id) WHERE brief_id IS NOT NULL;
CREATE UNIQUE INDEX exchanges_by_source_key ON exchanges(source_key)
  WHERE source_key IS NOT NULL;
CREATE INDEX exchanges_by_chain ON exchanges(substr(chain_hash, 1, 4));

CREATE TABLE brief_sources(
  brief_id BIGINT NOT NULL REFERENCES briefs(id),
  exchange_id BIGINT NOT NULL,
  content_hash BYTEA NOT NULL,
  PRIMARY KEY (brief_id, exchange_id)
);
CREATE INDEX brief_sources_by_exchange ON brief_sources(exchange_id);

CREATE TABLE milestones(
  exchange_id BIGINT PRIMARY KEY REFERENCES exchanges(id),
  session_id BIGINT NOT NULL REFERENCES sessions(id),
  label TEXT NOT NULL,
  created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX milestones_by_session ON milestones(session_id, exchange_id);

CREATE TABLE runs(
  seq BIGSERIAL PRIMARY KEY,
  run_id TEXT NOT NULL UNIQUE,
  graph TEXT NOT NULL,
  status TEXT NOT NULL,
  started_at DOUBLE PRECISION NOT NULL,
  duration_ms DOUBLE PRECISION NOT NULL,
  trace BYTEA NOT NULL
);

-- The keyword index: the turn's words (weight A), its month and year (B) and the words
-- of the turns before it (C), as in SQLite's body/dated/context columns.
CREATE TABLE exchanges_fts(
  rowid BIGINT PRIMARY KEY,
  session_id BIGINT NOT NULL,
  doc TSVECTOR NOT NULL
);
CREATE INDEX exchanges_fts_doc ON exchanges_fts USING gin(doc);
CREATE INDEX exchanges_fts_by_session ON exchanges_fts(session_id, rowid);

CREATE TABLE provider_vectors(
  exchange_id BIGINT NOT NULL REFERENCES exchanges(id) ON DELETE CASCADE,
  model TEXT NOT NULL,
  embedding BYTEA NOT NULL,
  PRIMARY KEY (model, exchange_id)
);
CREATE INDEX provider_vectors_by_exchange ON provider_vectors(exchange_id);

CREATE TABLE forgotten(
  exchange_id BIGINT PRIMARY KEY,
  session_id BIGINT NOT NULL REFERENCES sessions(id),
  forgotten_at DOUBLE PRECISION NOT NULL,
  reason TEXT NOT NULL,
  selector TEXT NOT NULL,
  content_hash BYTEA NOT NULL,
  chain_hash BYTEA NOT NULL,
  brief_id BIGINT,
  origin BYTEA
);
CREATE INDEX forgotten_by_session ON forgotten(session_id, exchange_id);
CREATE INDEX forgotten_by_chain ON forgotten(chain_hash);
CREATE INDEX forgotten_by_origin ON forgotten(origin) WHERE origin IS NOT NULL;

CREATE TABLE signal_flags(
  exchange_id BIGINT NOT NULL REFERENCES exchanges(id) ON DELETE CASCADE,
  session_id BIGINT NOT NULL REFERENCES sessions(id),
  signature TEXT NOT NULL,
  span_start BIGINT NOT NULL,
  span_end BIGINT NOT NULL,
  span TEXT NOT NULL,
  PRIMARY KEY (exchange_id, signature, span_start)
);
CREATE INDEX signal_flags_by_session ON signal_flags(session_id, exchange_id);
CREATE INDEX signal_flags_by_signature ON signal_flags(signature, exchange_id);

CREATE TABLE graph_entities(
  id BIGSERIAL PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  label TEXT NOT NULL,
  turns BIGINT NOT NULL DEFAULT 0,
  community BIGINT,
  centrality DOUBLE PRECISION NOT NULL DEFAULT 0
);
CREATE INDEX graph_entities_by_community ON graph_entities(community, centrality);
CREATE TABLE graph_aliases(
  entity_id BIGINT NOT NULL,
  surface TEXT NOT NULL,
  kind TEXT NOT NULL,
  mentions BIGINT NOT NULL,
  PRIMARY KEY (entity_id, surface, kind)
);
CREATE TABLE graph_entity_turns(
  entity_id BIGINT NOT NULL,
  exchange_id BIGINT NOT NULL,
  session_id BIGINT NOT NULL,
  PRIMARY KEY (entity_id, exchange_id)
);
CREATE INDEX graph_entity_turns_by_exchange ON graph_entity_turns(exchange_id);
CREATE INDEX graph_entity_turns_by_session
  ON graph_entity_turns(session_id, entity_id, exchange_id);
CREATE TABLE graph_edges(
  id BIGSERIAL PRIMARY KEY,
  src BIGINT NOT NULL,
  dst BIGINT NOT NULL,
  kind TEXT NOT NULL,
  turns BIGINT NOT NULL DEFAULT 0,
  UNIQUE (src, dst, kind)
);
CREATE INDEX graph_edges_by_src_turns ON graph_edges(src, turns);
CREATE INDEX graph_edges_by_dst_turns ON graph_edges(dst, turns);
CREATE TABLE graph_edge_turns(
  edge_id BIGINT NOT NULL,
  exchange_id BIGINT NOT NULL,
  session_id BIGINT NOT NULL,
  PRIMARY KEY (edge_id, exchange_id)
);
CREATE INDEX graph_edge_turns_by_exchange ON graph_edge_turns(exchange_id);
CREATE TABLE graph_cursors(
  session_id BIGINT PRIMARY KEY,
  through_id BIGINT NOT NULL
);
CREATE TABLE graph_communities(
  id BIGINT PRIMARY KEY,
  size BIGINT NOT NULL,
  label TEXT NOT NULL
);

CREATE TABLE cursors(
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  position BIGINT NOT NULL DEFAULT 0 CHECK (position >= 0),
  lines BIGINT NOT NULL DEFAULT 0,
  identity TEXT,
  head TEXT,
  session TEXT,
  captured BIGINT NOT NULL DEFAULT 0,
  duplicates BIGINT NOT NULL DEFAULT 0,
  skipped BIGINT NOT NULL DEFAULT 0,
  resets BIGINT NOT NULL DEFAULT 0,
  last_success_at DOUBLE PRECISION,
  last_error TEXT,
  last_error_at DOUBLE PRECISION,
  updated_at DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (kind, name)
);
CREATE INDEX cursors_by_update ON cursors(updated_at);

CREATE TABLE turn_origins(
  origin BYTEA PRIMARY KEY,
  exchange_id BIGINT NOT NULL,
  peer TEXT NOT NULL,
  received_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX turn_origins_by_exchange ON turn_origins(exchange_id);

-- SQLite functions the shared statements use: group_concat(), json_each(),
-- json_group_array(), instr() and
-- two-argument max() and min().
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


def initial(conn: Conn, vector_dim: int) -> None:
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    conn.execute(INITIAL)
    conn.execute(
        f"""
        CREATE TABLE exchange_vectors(
          rowid BIGINT PRIMARY KEY,
          session_id BIGINT NOT NULL,
          embedding halfvec({int(vector_dim)}) NOT NULL
        );
        CREATE INDEX exchange_vectors_by_session ON exchange_vectors(session_id, rowid);
        CREATE INDEX exchange_vectors_hnsw ON exchange_vectors
          USING hnsw (embedding halfvec_ip_ops);
        """
    )
    conn.execute("INSERT INTO meta(key, value) VALUES ('vector_dim', ?)", (str(vector_dim),))
    # The store's id on the coordination bus (SQLite migration m011_bus_outbox).
    conn.execute("INSERT INTO meta(key, value) "
                 "VALUES ('store_id', replace(gen_random_uuid()::text, '-', ''))")


def traces_without_text(conn: Conn, vector_dim: int) -> None:
    """As SQLite migration m013: stored stage traces lose the texts that earlier
    versions quoted in them (PostgreSQL reclaims the old row versions at its next
    vacuum)."""
    from store.runs import strip_stored_traces

    strip_stored_traces(conn)


def session_cwd(conn: Conn, vector_dim: int) -> None:
    """The directory a session worked in (SQLite migration m014_session_cwd)."""
    conn.execute(
        """
        ALTER TABLE sessions ADD COLUMN cwd TEXT;
        CREATE INDEX sessions_by_cwd ON sessions(cwd, last_at) WHERE cwd IS NOT NULL;
        """
    )


def scale_tuning(conn: Conn, vector_dim: int) -> None:
    """PostgreSQL only. The hashed vectors lose their HNSW index: each process searches
    its in-memory copy (store.postgres.vectors), and an insert into the graph cost more
    than the rest of a turn's ingest. A session's row is rewritten by every ingest (its
    chain head, counters and last turn's time): with room left on its page and no index
    on a column the ingest changes, the new version is a heap-only tuple (HOT) on the
    same page, pruned without VACUUM, instead of a new entry in every index of the
    table. The directory's sessions are few; they are sorted by recency when read."""
    conn.execute(
        """
        DROP INDEX IF EXISTS exchange_vectors_hnsw;
        ALTER TABLE sessions SET (fillfactor = 50);
        DROP INDEX IF EXISTS sessions_by_cwd;
        CREATE INDEX sessions_by_cwd ON sessions(cwd) WHERE cwd IS NOT NULL;
        """
    )
