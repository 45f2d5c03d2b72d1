"""Both backends' schemas come from the one migration list: a new store of each has the
same tables, columns and indexes, and PostgreSQL's first step is what SQLite's first
migrations leave, folded."""

from __future__ import annotations

from pathlib import Path

import apsw
import psycopg

from store.backend import open_store
from store.migrations import MIGRATIONS, POSTGRESQL_SINCE, RECORDED
from store.schema import AddColumn, DropIndex, Index, Table, column, final_schema
from tests.pg_server import PostgresServer

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
