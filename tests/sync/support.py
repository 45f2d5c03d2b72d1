"""Helpers of the sync tests: stores opened as the application opens them, what a
store holds (turn identities, table snapshots) read without the application."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw

from stenographer.app import App, open_app
from stenographer.settings import Settings
from store.exchanges import turn_trace_sql

IDENTITY = f"""
SELECT s.name, e.role, e.created_at, hex(e.content_hash), e.source_key,
       {turn_trace_sql("e", "s")},
       hex(coalesce(o.origin, e.chain_hash))
FROM exchanges e JOIN sessions s ON s.id = e.session_id
LEFT JOIN turn_origins o ON o.exchange_id = e.id ORDER BY e.id"""
TABLES = ("sessions", "exchanges", "briefs", "brief_sources", "turn_origins", "forgotten",
          "milestones", "cursors")


@contextmanager
def opened(data_dir: Path, **settings: Any) -> Iterator[App]:
    app = open_app(Settings(data_dir=data_dir, **settings))
    try:
        yield app
    finally:
        app.close()


def readonly(data_dir: Path) -> apsw.Connection:
    return apsw.Connection(str(data_dir / "steno.db"), flags=apsw.SQLITE_OPEN_READONLY)


def identities(data_dir: Path) -> list[tuple[Any, ...]]:
    """Every stored turn as (session, role, time, content hash, source key, trace id,
    origin), in id order."""
    conn = readonly(data_dir)
    try:
        return [tuple(r) for r in conn.execute(IDENTITY)]
    finally:
        conn.close()


def chains(data_dir: Path) -> dict[str, str]:
    """Content hash → chain hash of every stored turn."""
    conn = readonly(data_dir)
    try:
        return {bytes(h).hex(): bytes(c).hex() for h, c in
                conn.execute("SELECT content_hash, chain_hash FROM exchanges")}
    finally:
        conn.close()


def heads(data_dir: Path) -> dict[str, str]:
    """Session name → chain head."""
    conn = readonly(data_dir)
    try:
        return {name: bytes(h).hex() for name, h in
                conn.execute("SELECT name, chain_head FROM sessions")}
    finally:
        conn.close()


def snapshot(data_dir: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the tables sync may write (not runs: each run adds its trace)."""
    conn = readonly(data_dir)
    try:
        return {t: [tuple(r) for r in conn.execute(f"SELECT * FROM {t} ORDER BY 1")]
                for t in TABLES}
    finally:
        conn.close()


def ingest(app: App, session: str, texts: list[str], *, start: int = 0) -> list[int]:
    ids = []
    for i, text in enumerate(texts, start=start):
        out, _ = app.run("ingest", {"role": ("user", "assistant")[i % 2], "content": text,
                                    "session_id": session})
        ids.append(int(out["reply"]["exchange_id"]))
    return ids


def audit_passes(app: App) -> bool:
    out, _ = app.run("contract_audit", {})
    failed = [c for c in out["report"]["contracts"] if not c["passed"]]
    assert not failed, failed
    return bool(out["report"]["passed"])
