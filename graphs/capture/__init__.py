"""capture: follow the transcripts that Claude Code and Codex CLI write.

A capture pass over one file runs ``capture_read`` (validate → where to read from: the
cursor, or 0 after a truncation or rotation → the next batch of records, corrupt lines
reported and stepped over), then the ``ingest`` graph once per record (each with its
source key; a record already stored answers "Already captured"), then
``capture_commit`` (validate → move the cursor past what was stored, with the counts
and the last success or error). The driver that strings them together is
``stenographer.capture``.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

READ = {
    "schema_version": SCHEMA_VERSION,
    "name": "capture_read",
    "channels": channels("request", "source", "start", "batch"),
    "nodes": {
        "validate": {"type": "checked_transcript"},
        "start": {"type": "transcript_start"},
        "batch": {"type": "transcript_batch"},
    },
    "edges": chain(START, "validate", "start", "batch", END),
}

COMMIT = {
    "schema_version": SCHEMA_VERSION,
    "name": "capture_commit",
    "channels": channels("request", "step", "cursor"),
    "nodes": {
        "validate": {"type": "checked_cursor_step"},
        "cursor": {"type": "advanced_cursor"},
    },
    "edges": chain(START, "validate", "cursor", END),
}

DEFINITIONS = [READ, COMMIT]
