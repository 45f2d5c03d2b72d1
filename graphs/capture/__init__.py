"""capture: follow the transcripts that Claude Code and Codex CLI write.

``capture`` is one pass over a list of transcript files, one graph run: validate → the
next file → where to read from (its cursor, or 0 after a truncation or rotation) → the
next batch of records (corrupt lines reported and stepped over) → the batch's records
stored as one ingest batch (graphs.ingest ``batch_stages``: the ingest's node functions,
one transaction; each record with its source key, so a record already stored counts as
"already captured" and one the validation refuses is reported and stepped over) → the
cursor moves past the batch, with the counts and the last success or error → the file's
report; again from "where to read from" while the batch was full (or a rotated
predecessor was drained) and no stop was asked, then the next file. Each batch has the
one after it (the file's next, or the next file's first) read, validated and redacted
before it is stored, and most of that one's per-turn stages computed by the worker
process while this one is stored and compressed (``read_ahead``); the next round takes
it up after "where to read from" when the cursor starts where it was read from
(``ahead_taken``), on to reading the next. A
file that cannot be read, or a batch the store cannot take, ends that file with its
error (nothing of the batch is stored; the next pass reads it again). A watcher
(``stenographer.capture``) runs the graph once per tick over the files that changed.

``capture_read`` and ``capture_commit`` are its read and commit stages on their own; the
``hook`` graph inlines the pass (``pass_stages``) as the route of a host's capture events.
"""

from typing import Any

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels, linear
from graphs.ingest import BATCH_CHANNELS, batch_stages

__all__ = ["DEFINITIONS", "ERRORS", "MAX_STEPS", "PASS_CHANNELS", "pass_stages"]

# About fifteen steps a batch of records: millions of records stay far below this.
MAX_STEPS = 10_000_000
ERRORS = "failures"  # the failure edges' error channel

READ = linear(
    "capture_read",
    channels("request", "source", "start", "batch"),
    validate="checked_transcript",
    start="transcript_start",
    batch="transcript_batch",
)

COMMIT = linear(
    "capture_commit",
    channels("request", "step", "cursor"),
    validate="checked_cursor_step",
    cursor="advanced_cursor",
)

# Stages whose failure ends the file, not the pass: reading it, and the store's writes.
_FAILING = ("start", "taken", "read", "ingest_previous", "ahead", "ingest_store",
            "ingest_compress", "cursor")
PASS_CHANNELS = ("files", "reports", "report", "source", "start", "batch", *BATCH_CHANNELS,
                 "ahead", "taken", "step", "skipped", "cursor", "again", "reply")


def pass_stages(prefix: str = "", then: str = END) -> tuple[
        dict[str, Any], list[dict[str, str]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The pass's nodes (named with ``prefix``), edges, loops and failure edges, from
    ``prefix + "validate"`` to ``then``: the hook graph inlines them (a subgraph would
    stop after the engine's default number of steps). Channels: ``PASS_CHANNELS``, the
    append channel ``ERRORS`` and the input ``request``."""
    n = {name: prefix + name for name in ("validate", "next", "start", "taken", "read",
                                          "records", "ahead", "step", "cursor", "tally",
                                          "failed", "reply")}
    ingest_nodes, ingest_edges, ingest_first, ingest_last = batch_stages(prefix + "ingest_")
    extract, store = prefix + "ingest_extract", prefix + "ingest_store"
    # the next batch read ahead between the per-turn stages and the store
    ingest_edges = [e for e in ingest_edges if (e["from"], e["to"]) != (extract, store)] \
        + chain(extract, n["ahead"], store)
    nodes = {
        n["validate"]: {"type": "checked_sources"},
        n["next"]: {"type": "next_source"},
        n["start"]: {"type": "transcript_start"},
        n["read"]: {"type": "transcript_batch"},
        n["taken"]: {"type": "ahead_taken"},
        n["records"]: {"type": "capture_items"},
        **ingest_nodes,
        n["ahead"]: {"type": "read_ahead"},
        n["step"]: {"type": "cursor_step"},
        n["cursor"]: {"type": "advanced_cursor"},
        n["tally"]: {"type": "file_tally"},
        n["failed"]: {"type": "file_failed"},
        n["reply"]: {"type": "capture_reply"},
    }
    edges = chain(n["validate"], n["next"]) \
        + chain(n["start"], n["taken"]) + chain(n["read"], n["records"], ingest_first) \
        + ingest_edges \
        + chain(ingest_last, n["step"], n["cursor"], n["tally"]) \
        + chain(n["failed"], n["next"]) + chain(n["reply"], then)
    loops = [
        {"from": n["taken"], "condition": "ahead_taken",
         "routes": {"taken": n["ahead"], "default": n["read"]}},
        {"from": n["next"], "condition": "has_source",
         "routes": {"yes": n["start"], "default": n["reply"]}},
        {"from": n["tally"], "condition": "capture_again",
         "routes": {"again": n["start"], "default": n["next"]}},
    ]
    failures = [{"from": prefix + stage, "to": n["failed"], "error_channel": ERRORS}
                for stage in _FAILING]
    return nodes, edges, loops, failures


_nodes, _edges, _loops, _failures = pass_stages()

PASS = {
    "schema_version": SCHEMA_VERSION,
    "name": "capture",
    "channels": channels("request", *PASS_CHANNELS, append=(ERRORS,)),
    "nodes": _nodes,
    "edges": chain(START, "validate") + _edges,
    "conditional_edges": _loops,
    "failure_edges": _failures,
}

DEFINITIONS = [READ, COMMIT, PASS]
