"""Stage traces of graph runs: persisted compressed, with bounded retention.

A stored trace is its JSON compressed by zstd with a shared dictionary of typical
traces (``store.trace_dictionary``), marked by a leading format byte; traces stored
before the dictionary are plain zstd frames (which begin with the zstd magic number,
never with a format byte) and are read as they are.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import zstandard

from store.sql import Conn, all_rows, first, one
from store.trace_dictionary import TRACE_DICTIONARY_V1, TRACE_DICTIONARY_V2

__all__ = [
    "PRUNE_EVERY",
    "TraceBuffer",
    "decode_trace",
    "encode_trace",
    "load_trace",
    "recent_runs",
    "save_trace",
    "strip_stored_traces",
    "without_text",
]

PRUNE_EVERY = 64  # prune once every this many saved runs: O(1) amortised per run
# Traces waiting while the store refuses writes (a full disk): the oldest are dropped.
MAX_PENDING = 10_000

INSERT_RUN = """
INSERT INTO runs(run_id, graph, status, started_at, duration_ms, trace)
VALUES (?, ?, ?, ?, ?, ?) RETURNING seq"""
PRUNE_RUNS = "DELETE FROM runs WHERE seq <= ? - ?"
SELECT_TRACE = "SELECT trace FROM runs WHERE run_id = ?"
SELECT_RECENT = """
SELECT run_id, graph, status, started_at, duration_ms FROM runs
WHERE (?1 IS NULL OR graph = ?1) ORDER BY seq DESC LIMIT ?2"""

# Format bytes: compressed with TRACE_DICTIONARY_V1, V2 (written now).
_DICTIONARIES = {b"\x01": TRACE_DICTIONARY_V1, b"\x02": TRACE_DICTIONARY_V2}
_FORMAT = b"\x02"
_decompressors = {
    mark: zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(
        raw, dict_type=zstandard.DICT_TYPE_RAWCONTENT))
    for mark, raw in _DICTIONARIES.items()}
_compressor = zstandard.ZstdCompressor(
    level=3, write_checksum=False, dict_data=zstandard.ZstdCompressionDict(
        _DICTIONARIES[_FORMAT], dict_type=zstandard.DICT_TYPE_RAWCONTENT))
_plain = zstandard.ZstdDecompressor()


def save_trace(conn: Conn, trace: dict[str, Any], started_at: float,
               retention: int, blob: bytes | None = None) -> None:
    """Store one trace (``blob``: its ``encode_trace``, when done already); every
    PRUNE_EVERY runs drop those beyond ``retention``."""
    if blob is None:
        blob = encode_trace(trace)
    seq: int = one(
        conn,
        INSERT_RUN,
        (trace["run_id"], trace["graph"], trace["status"], started_at, trace["duration_ms"],
         blob),
    )[0]
    if seq % PRUNE_EVERY == 0:
        conn.execute(PRUNE_RUNS, (seq, retention))


def encode_trace(trace: dict[str, Any]) -> bytes:
    """A trace as the blob stored for it."""
    return _FORMAT + _compressor.compress(
        json.dumps(trace, separators=(",", ":")).encode())


def decode_trace(blob: bytes) -> dict[str, Any]:
    """A stored trace blob as the trace it holds."""
    data = bytes(blob)
    decompressor = _decompressors.get(data[:1])
    text = _plain.decompress(data) if decompressor is None else decompressor.decompress(data[1:])
    trace: dict[str, Any] = json.loads(text)
    return trace


# What the summaries of earlier versions held that is not text: counts, numbers, flags,
# a dict's field names. They quoted every string's first 80 characters (a turn's
# neighbours' words, queries, replies) and every error message; today's summaries
# (graphs.summary) never do.
_KEPT_SUMMARY = re.compile(
    r"\[\]|\[\d+ items\]|\{\}|true|false|null|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
    r"|\{[a-z][a-z0-9_]*(?:, [a-z][a-z0-9_]*)*…?\}")
_ERROR_KIND = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
TEXT_NOT_KEPT = "(text not kept)"


def without_text(trace: dict[str, Any]) -> dict[str, Any]:
    """A trace stored by an earlier version, its texts removed: each run keeps its id,
    graph, status, stages and durations, and the summaries that are counts or names."""
    stages = []
    for stage in trace["stages"]:
        error = stage.get("error")
        if error is not None:
            kind = str(error).split(":", 1)[0]
            error = (f"{kind}: " if _ERROR_KIND.fullmatch(kind) else "") + "(message not kept)"
        writes = {channel: summary if _KEPT_SUMMARY.fullmatch(summary) else TEXT_NOT_KEPT
                  for channel, summary in stage["writes"].items()}
        stages.append({**stage, "writes": writes, "error": error})
    return {**trace, "stages": stages}


SELECT_ALL_TRACES = "SELECT seq, trace FROM runs ORDER BY seq"
SET_TRACE = "UPDATE runs SET trace = ? WHERE seq = ?"


def strip_stored_traces(conn: Conn) -> int:
    """Rewrite every stored trace ``without_text`` (a migration of both backends);
    returns how many. Call inside a write."""
    rows = all_rows(conn, SELECT_ALL_TRACES)
    for seq, blob in rows:
        conn.execute(SET_TRACE, (encode_trace(without_text(decode_trace(blob))), seq))
    return len(rows)


def load_trace(conn: Conn, run_id: str) -> dict[str, Any] | None:
    row = first(conn, SELECT_TRACE, (run_id,))
    return None if row is None else decode_trace(row[0])


def recent_runs(conn: Conn, limit: int, graph: str | None = None
                ) -> list[dict[str, Any]]:
    return [
        {"run_id": r[0], "graph": r[1], "status": r[2], "started_at": r[3], "duration_ms": r[4]}
        for r in all_rows(conn, SELECT_RECENT, (graph, limit))
    ]


class TraceBuffer:
    """Traces waiting to be written: flushed in one transaction by a background thread.

    A run does not pay for a commit of its own trace; a trace reaches the file within
    ``interval`` seconds, or at ``flush()`` (the store calls it on close and before it
    reads traces). A process killed with SIGKILL loses at most that window of traces,
    never a turn. With no ``write`` (a read-only store) traces are not kept.
    """

    def __init__(self, write: Any | None, interval: float = 0.25) -> None:
        self._write = write  # Store.write
        self._interval = interval
        self._items: list[tuple[dict[str, Any], float, int]] = []
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()  # a flush returns only once its traces are stored
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None

    def add(self, trace: dict[str, Any], started_at: float, retention: int) -> None:
        if self._write is None:
            return
        with self._lock:
            if len(self._items) >= MAX_PENDING:
                del self._items[:len(self._items) + 1 - MAX_PENDING]
            self._items.append((trace, started_at, retention))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="steno-traces", daemon=True
                )
                self._thread.start()

    def _loop(self) -> None:
        while not self._stop:
            self._wake.wait(self._interval)
            self._wake.clear()
            try:
                self.flush()
            except Exception:  # the store may be busy or closing; retry next round
                time.sleep(self._interval)

    def flush(self) -> None:
        with self._flush_lock:
            with self._lock:
                items, self._items = self._items, []
            if not items or self._write is None:
                return
            try:
                # Encoded before the write: the store's write lock (which the next
                # ingest waits for) is held for the inserts only.
                blobs = [encode_trace(trace) for trace, _, _ in items]
                with self._write() as conn:
                    for (trace, started_at, retention), blob in zip(items, blobs, strict=True):
                        save_trace(conn, trace, started_at, retention, blob)
            except BaseException:
                with self._lock:
                    self._items[:0] = items
                raise

    def close(self) -> None:
        self._stop = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.flush()
