"""capture: follow the transcripts that Claude Code and Codex CLI write.

``capture`` is one pass over a list of transcript files, one graph run: validate → the
next file → where to read from (its cursor, or 0 after a truncation or rotation) → the
next batch of records (corrupt lines reported and stepped over) → the batch's records
stored as one ingest batch (graphs.ingest ``batch_stages``: the ingest's node functions,
one transaction; each record with its source key, so a record already stored counts as
"already captured" and one the validation refuses is reported and stepped over) → the
cursor moves past the batch, with the counts and the last success or error → the file's
report; again from "where to read from" while the batch was full (or a rotated
predecessor was drained) and no stop was asked, then the next file. A file that cannot
be read, or a batch the store cannot take, ends that file with its error (nothing of
the batch is stored; the next pass reads it again). A watcher (``stenographer.capture``)
runs the graph once per tick over the files that changed.

``capture_read`` and ``capture_commit`` are its read and commit stages on their own.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels, linear
from graphs.ingest import BATCH_CHANNELS, batch_stages

__all__ = ["DEFINITIONS", "MAX_STEPS"]

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

_ingest_nodes, _ingest_edges, _ingest_first, _ingest_last = batch_stages("ingest_")
# Stages whose failure ends the file, not the pass: reading it, and the store's writes.
_FAILING = ("start", "read", "ingest_previous", "ingest_store", "ingest_compress", "cursor")

PASS = {
    "schema_version": SCHEMA_VERSION,
    "name": "capture",
    "channels": channels("request", "files", "reports", "report", "source", "start", "batch",
                         *BATCH_CHANNELS, "step", "skipped", "cursor", "again", "reply",
                         append=(ERRORS,)),
    "nodes": {
        "validate": {"type": "checked_sources"},
        "next": {"type": "next_source"},
        "start": {"type": "transcript_start"},
        "read": {"type": "transcript_batch"},
        "records": {"type": "capture_items"},
        **_ingest_nodes,
        "step": {"type": "cursor_step"},
        "cursor": {"type": "advanced_cursor"},
        "tally": {"type": "file_tally"},
        "failed": {"type": "file_failed"},
        "reply": {"type": "capture_reply"},
    },
    "edges": chain(START, "validate", "next") + chain("start", "read", "records", _ingest_first)
    + _ingest_edges + chain(_ingest_last, "step", "cursor", "tally") + chain("failed", "next")
    + chain("reply", END),
    "conditional_edges": [
        {"from": "next", "condition": "has_source",
         "routes": {"yes": "start", "default": "reply"}},
        {"from": "tally", "condition": "capture_again",
         "routes": {"again": "start", "default": "next"}},
    ],
    "failure_edges": [{"from": node, "to": "failed", "error_channel": ERRORS}
                      for node in _FAILING],
}

DEFINITIONS = [READ, COMMIT, PASS]
