"""The store's schema as dialect-neutral declarations, which each dialect renders.

A migration (``store.migrations``) is an ordered list of these operations. Each is
written once, in the store's own terms (an integer, a real, a text, bytes; an id the
database gives out; the keyword index; the hashed vectors), and rendered as SQL by
``store.sqlite.schema`` (SQLite: FTS5, sqlite-vec's vec0, AUTOINCREMENT, BLOB) and
``store.postgres.schema`` (PostgreSQL: a weighted tsvector with GIN, pgvector's halfvec
with HNSW, BIGSERIAL ids, bytea).

``Data`` is the one operation that is not a declaration: a function that carries the
rows a store already holds into the new shape (re-indexing, backfilling a column). A new
PostgreSQL database starts at the schema that SQLite's first migrations built up to (see
``store.migrations``), so those functions run on SQLite stores only; the later ones
run on both.

``final_schema`` replays operations into the objects they leave (a table's added
columns folded into it, a dropped index gone), which is how a dialect that starts later
creates at once what the earlier migrations built up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import ClassVar

from store.sql import Conn

__all__ = [
    "AddColumn",
    "Column",
    "Data",
    "DropIndex",
    "DropTable",
    "Index",
    "KeywordTable",
    "NewStoreId",
    "Operation",
    "Renderer",
    "Table",
    "Type",
    "VectorTable",
    "column",
    "final_schema",
    "vector_dim_row",
]


class Type(Enum):
    INT = "int"  # a 64-bit integer
    REAL = "real"  # a double
    TEXT = "text"
    BYTES = "bytes"


@dataclass(frozen=True)
class Column:
    """One column. ``key`` makes it the table's primary key (an integer one is SQLite's
    rowid); ``generated`` says the database gives ids out when a row names none
    (``"reused"``: SQLite may give out again the largest id once its row is deleted;
    ``"never_reused"``: never, SQLite's AUTOINCREMENT)."""

    name: str
    type: Type
    not_null: bool = False
    key: bool = False
    generated: str | None = None  # None | "reused" | "never_reused"
    unique: bool = False
    default: str | None = None  # an SQL literal both dialects read alike
    check: str | None = None  # an SQL condition both dialects read alike
    references: str | None = None  # "table(column)"
    on_delete_cascade: bool = False


def column(spec: str, **options: object) -> Column:
    """``column("name TEXT NOT NULL")``: a column from its name, its type (INT, REAL,
    TEXT or BYTES) and optionally NOT NULL; the other attributes as keywords."""
    words = spec.split()
    name, kind, rest = words[0], Type[words[1]], words[2:]
    if rest not in ([], ["NOT", "NULL"]):
        raise ValueError(f"column spec {spec!r}: only 'NOT NULL' may follow the type")
    return Column(name, kind, bool(rest), **options)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Table:
    """An ordinary table. ``primary_key``: a key of several columns, or of one that is
    not an integer id. ``clustered``: rows are stored in primary-key order
    (SQLite's WITHOUT ROWID; PostgreSQL keeps a heap and its key's index as for any
    table)."""

    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    unique: tuple[tuple[str, ...], ...] = ()
    clustered: bool = False


@dataclass(frozen=True)
class Index:
    """An index on columns or expressions both dialects read alike. ``then_id``: the
    entries of one key are in the order of this column, the table's integer id
    (SQLite's index entries end with the rowid already; PostgreSQL's get the column)."""

    name: str
    table: str
    keys: tuple[str, ...]
    where: str | None = None
    unique: bool = False
    then_id: str | None = None


@dataclass(frozen=True)
class AddColumn:
    table: str
    column: Column


@dataclass(frozen=True)
class DropIndex:
    name: str


@dataclass(frozen=True)
class DropTable:
    name: str


@dataclass(frozen=True)
class KeywordTable:
    """The keyword index of the turns: ``fields`` in decreasing weight, the last
    (``scope``) the session's token (SQLite: a contentless FTS5 table with ``tokenize``;
    PostgreSQL: one weighted tsvector a turn with its session, GIN-indexed)."""

    name: str
    fields: tuple[str, ...]
    tokenize: str


@dataclass(frozen=True)
class VectorTable:
    """The hashed vectors of the turns with their session (SQLite: sqlite-vec's vec0
    with int8 components of ``dim``; PostgreSQL: pgvector's halfvec of the dimension
    the store is opened with, HNSW-indexed for the inner product). Its dimension is
    recorded as ``meta.vector_dim``."""

    name: str
    dim: int


def vector_dim_row(dim: int) -> str:
    """The vector table's dimension, recorded in ``meta`` as it is created."""
    return ("INSERT INTO meta(key, value) VALUES ('vector_dim', "
            f"'{int(dim)}') ON CONFLICT (key) DO UPDATE SET value = excluded.value")


@dataclass(frozen=True)
class NewStoreId:
    """``meta.store_id``: a random id made once (32 hexadecimal digits)."""


@dataclass(frozen=True)
class Data:
    """Carry the rows a store holds into the new shape (see the module's notes)."""

    run: Callable[[Conn], None]
    erases: bool = False  # old bytes must not survive in the file (SQLite's secure_delete)


Operation = (Table | Index | AddColumn | DropIndex | DropTable | KeywordTable | VectorTable
             | NewStoreId | Data)


@dataclass
class _Objects:
    tables: dict[str, Table | KeywordTable | VectorTable] = field(default_factory=dict)
    indexes: dict[str, Index] = field(default_factory=dict)
    seeds: list[NewStoreId] = field(default_factory=list)


def final_schema(operations: Iterable[Operation]) -> list[Operation]:
    """What ``operations`` leave, as operations that create it at once: tables first
    (in creation order, added columns folded in), then indexes, then seed rows; the
    ``Data`` steps are left out (there are no rows to carry)."""
    state = _Objects()
    for op in operations:
        if isinstance(op, Table | KeywordTable | VectorTable):
            state.tables[op.name] = op
        elif isinstance(op, Index):
            state.indexes[op.name] = op
        elif isinstance(op, AddColumn):
            table = state.tables[op.table]
            assert isinstance(table, Table), f"a column added to {op.table}"
            state.tables[op.table] = replace(table, columns=(*table.columns, op.column))
        elif isinstance(op, DropIndex):
            del state.indexes[op.name]
        elif isinstance(op, DropTable):
            del state.tables[op.name]
            for name in [i.name for i in state.indexes.values() if i.table == op.name]:
                del state.indexes[name]
        elif isinstance(op, NewStoreId):
            state.seeds.append(op)
    created: Sequence[Operation] = [*state.tables.values(), *state.indexes.values()]
    return [*created, *state.seeds]


class Renderer:
    """What both dialects write alike: tables, indexes, columns. A dialect names its
    types and how an integer id is declared, and writes the keyword index, the vectors
    and the store id its own way."""

    types: ClassVar[Mapping[Type, str]]

    def key(self, c: Column) -> str:
        """The type and key words of a primary key column."""
        return f"{self.types[c.type]} PRIMARY KEY"

    def column(self, c: Column) -> str:
        parts = [c.name, self.key(c) if c.key else self.types[c.type]]
        if c.not_null:
            parts.append("NOT NULL")
        if c.unique:
            parts.append("UNIQUE")
        if c.default is not None:
            parts.append(f"DEFAULT {c.default}")
        if c.check is not None:
            parts.append(f"CHECK ({c.check})")
        if c.references is not None:
            parts.append(f"REFERENCES {c.references}")
            if c.on_delete_cascade:
                parts.append("ON DELETE CASCADE")
        return " ".join(parts)

    def table(self, t: Table) -> str:
        lines = [self.column(c) for c in t.columns]
        if t.primary_key:
            lines.append(f"PRIMARY KEY ({', '.join(t.primary_key)})")
        lines += [f"UNIQUE ({', '.join(u)})" for u in t.unique]
        body = ",\n  ".join(lines)
        return f"CREATE TABLE {t.name}(\n  {body}\n)"

    def index_keys(self, i: Index) -> tuple[str, ...]:
        return i.keys

    def index(self, i: Index) -> str:
        where = f" WHERE {i.where}" if i.where else ""
        return (f"CREATE {'UNIQUE ' if i.unique else ''}INDEX {i.name} "
                f"ON {i.table}({', '.join(self.index_keys(i))}){where}")

    def keyword_table(self, k: KeywordTable) -> str:
        raise NotImplementedError

    def vector_table(self, v: VectorTable) -> str:
        raise NotImplementedError

    def new_store_id(self) -> str:
        raise NotImplementedError

    def render(self, op: Operation) -> str:
        """The statements of one declaration (not ``Data``)."""
        if isinstance(op, Table):
            return self.table(op)
        if isinstance(op, Index):
            return self.index(op)
        if isinstance(op, AddColumn):
            return f"ALTER TABLE {op.table} ADD COLUMN {self.column(op.column)}"
        if isinstance(op, DropIndex):
            return f"DROP INDEX {op.name}"
        if isinstance(op, DropTable):
            return f"DROP TABLE {op.name}"
        if isinstance(op, KeywordTable):
            return self.keyword_table(op)
        if isinstance(op, VectorTable):
            return self.vector_table(op)
        if isinstance(op, NewStoreId):
            return self.new_store_id()
        raise TypeError(f"not a declaration: {op!r}")
