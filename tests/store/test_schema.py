"""Both backends' schemas come from the one migration list: a new store of each has the
same tables, columns and indexes, and PostgreSQL's first step is what SQLite's first
migrations leave, folded."""

from __future__ import annotations

from pathlib import Path

import apsw
import psycopg

from store.backend import open_store
from store.db import vec0_path
from store.migrations import MIGRATIONS, POSTGRESQL_SINCE, RECORDED, SCHEMA_VERSION
from store.schema import AddColumn, DropIndex, Index, Table, column, final_schema
from tests.pg_server import PostgresServer
from tests.schema_stores import store_at_schema

# SQLite's derived keyword index has a queue; its virtual tables' shadow tables are
# SQLite's own, and PostgreSQL indexes its keyword and vector tables itself.
SQLITE_ONLY_TABLES = {"keyword_pending", "sqlite_sequence"}
POSTGRESQL_ONLY_INDEXES = {"exchanges_fts_doc", "exchanges_fts_by_session",
                           "exchange_vectors_by_session"}
# PostgreSQL's tables in place of FTS5's and vec0's virtual ones.
POSTGRESQL_INDEX_TABLES = {"exchanges_fts": {"rowid", "session_id", "doc"},
                           "exchange_vectors": {"rowid", "session_id", "embedding"}}


def sqlite_schema(path: Path) -> tuple[dict[str, set[str]], set[str]]:
    conn = apsw.Connection(str(path))
    try:
        rows = list(conn.execute(
            "SELECT type, name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_autoindex%'"))
        virtual = [n for t, n, sql in rows if t == "table" and sql.startswith("CREATE VIRTUAL")]
        tables = {n: {r[1] for r in conn.execute(f"PRAGMA table_info('{n}')")}
                  for t, n, sql in rows if t == "table" and not sql.startswith("CREATE VIRTUAL")
                  and not any(n.startswith(v + "_") for v in virtual)}
        indexes = {n for t, n, _ in rows if t == "index"}
    finally:
        conn.close()
    return tables, indexes


def postgresql_schema(url: str) -> tuple[dict[str, set[str]], set[str]]:
    with psycopg.connect(url) as conn:
        tables: dict[str, set[str]] = {}
        for table, name in conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema()"):
            tables.setdefault(str(table), set()).add(str(name))
        indexes = {str(r[0]) for r in conn.execute(  # but those of keys and UNIQUE
            "SELECT c.relname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid "
            "WHERE c.relnamespace = current_schema()::regnamespace AND NOT EXISTS("
            "  SELECT 1 FROM pg_constraint k WHERE k.conindid = x.indexrelid)")}
    return tables, indexes


def test_a_new_store_of_each_backend_has_the_same_tables_columns_and_indexes(
        tmp_path: Path, postgres_server: PostgresServer):
    open_store(tmp_path / "steno.db").close()
    url = postgres_server.database()
    open_store(tmp_path / "pg" / "steno.db", database_url=url, vector_dim=128).close()
    lite_tables, lite_indexes = sqlite_schema(tmp_path / "steno.db")
    pg_tables, pg_indexes = postgresql_schema(url)

    for name, columns in POSTGRESQL_INDEX_TABLES.items():
        assert pg_tables.pop(name) == columns
    assert {n: c for n, c in lite_tables.items() if n not in SQLITE_ONLY_TABLES} == pg_tables
    assert lite_indexes == pg_indexes - POSTGRESQL_ONLY_INDEXES
    assert len(RECORDED["sqlite"]) == len([m for m in MIGRATIONS if not m.postgresql_only])
    since = [m.name for m in MIGRATIONS].index(POSTGRESQL_SINCE)
    later = [m.name for m in MIGRATIONS[since:] if not m.sqlite_only]
    assert list(RECORDED["postgresql"].values()) == [
        f"p{v:03d}_{name}" for v, name in enumerate(["initial", *later], start=1)]


def test_the_final_schema_folds_added_columns_and_replaced_indexes():
    ops = [Table("t", (column("id INT", key=True), column("a TEXT NOT NULL"))),
           Index("t_by_a", "t", ("a", "id")),
           AddColumn("t", column("b BYTES")),
           DropIndex("t_by_a"),
           Index("t_by_a", "t", ("a",), then_id="id")]
    assert final_schema(ops) == [
        Table("t", (column("id INT", key=True), column("a TEXT NOT NULL"), column("b BYTES"))),
        Index("t_by_a", "t", ("a",), then_id="id")]


def _sqlite_objects(conn: apsw.Connection) -> dict[tuple[str, str], object]:
    """Every table's columns, keys, foreign keys and indexes, every index's and virtual
    table's and trigger's SQL, and the rows of ``meta`` but the random store id and the
    keyword index's epoch (a count of its writes): what a store's schema is, whatever
    statements made it."""
    found: dict[tuple[str, str], object] = {}
    for kind, name, sql in list(conn.execute("SELECT type, name, sql FROM sqlite_schema")):
        if kind == "table" and not sql.startswith("CREATE VIRTUAL"):
            found[kind, name] = (
                list(conn.execute(f"PRAGMA table_xinfo('{name}')")),
                list(conn.execute(f"PRAGMA foreign_key_list('{name}')")),
                [row[1:] for row in conn.execute(f"PRAGMA index_list('{name}')")],
                "WITHOUT ROWID" in sql)
        else:
            found[kind, name] = sql
    found["meta", "rows"] = sorted(conn.execute(
        "SELECT key, value FROM meta WHERE key NOT IN ('store_id', 'keyword_epoch')"))
    for key in ("store_id", "keyword_epoch"):
        found["meta", key] = conn.execute(
            "SELECT count(*) FROM meta WHERE key = ?", (key,)).fetchall()
    return found


def test_a_new_sqlite_store_created_at_once_is_the_store_every_migration_leaves(
        tmp_path: Path):
    """A new file gets the final schema in one transaction (``_create_new``): the same
    tables, columns, keys, indexes and seed rows as the migrations run one by one, and
    every migration recorded."""
    open_store(tmp_path / "new" / "steno.db").close()
    stepwise = store_at_schema(tmp_path / "stepwise" / "steno.db", SCHEMA_VERSION)
    at_once = apsw.Connection(str(tmp_path / "new" / "steno.db"))
    at_once.enable_load_extension(True)
    at_once.load_extension(vec0_path())
    try:
        assert _sqlite_objects(at_once) == _sqlite_objects(stepwise)
        recorded = "SELECT version, name FROM schema_migrations ORDER BY version"
        assert list(at_once.execute(recorded)) == list(stepwise.execute(recorded))
        assert len(list(at_once.execute(recorded))) == SCHEMA_VERSION
    finally:
        at_once.close()
        stepwise.close()
