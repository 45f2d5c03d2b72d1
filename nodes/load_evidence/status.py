"""Nodes: store counts and capture/delivery status; stored traces."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import iso
from nodes.load_evidence.capture_status import capture_summary
from nodes.load_evidence.delivery_status import delivery_summary
from nodes.publish.wording import counted
from store.errors import InvalidInput, NotFound
from store.rewrite import rewrite_status
from store.runs import load_trace, recent_runs
from store.stats import store_counts

__all__ = ["TraceReply", "capture_status", "recent_traces", "stored_trace"]


def _rewrite(found: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The file rewrite after a forget: pending (another connection holds old pages),
    done, or none yet; and its part of the status line."""
    since, done = found["pending_since"], found["done_at"]
    rewrite = {"state": found["state"], "pending_since": None if since is None else iso(since),
               "done_at": None if done is None else iso(done)}
    if since is not None:
        return rewrite, (f" | file rewrite after forget: pending since "
                         f"{rewrite['pending_since']} (another connection holds old pages; "
                         "retried in the background)")
    if done is not None:
        return rewrite, f" | file rewrite after forget: done at {rewrite['done_at']}"
    return rewrite, ""


class CaptureStatusWrites(TypedDict):
    status: Any
    text: Any


@node
def capture_status(*, run: RunContext) -> CaptureStatusWrites:
    with run.store.read() as conn:
        counts = store_counts(conn)
        rewrite, rewrite_text = _rewrite(rewrite_status(conn))
        capture, capture_text = capture_summary(conn, run.store.data_dir)
        delivery, delivery_text = delivery_summary(conn, run.settings.sync_peer)
    read_only = run.store.read_only
    status = {
        "store": {"path": run.store.location, "read_only": read_only, **counts,
                  "rewrite": rewrite},
        "capture": capture,
        "delivery": delivery,
    }
    text = (
        f"Store {status['store']['path']}"
        f"{' (read-only: calls that write are refused)' if read_only else ''}: "
        f"{counted(counts['exchanges'], 'exchange')} in "
        f"{counted(counts['sessions'], 'session')} ({counts['uncompressed']} uncompressed), "
        f"{counted(counts['briefs'], 'brief')}, {counted(counts['milestones'], 'milestone')}, "
        f"{counts['database_bytes']:,} bytes{rewrite_text} | {capture_text} | {delivery_text}"
    )
    return {"status": status, "text": text}


class TraceReply(TypedDict):
    """The trace graph's output: one run's stage trace, or the recent runs (the other
    is None)."""

    trace: dict[str, Any] | None
    runs: list[dict[str, Any]] | None


class StoredTraceWrites(TypedDict):
    reply: TraceReply


@node
def stored_trace(request: Any, *, run: RunContext) -> StoredTraceWrites:
    run_id = (request or {}).get("run_id")
    if not isinstance(run_id, str) or not run_id.isalnum() or len(run_id) > 64:
        raise InvalidInput("run_id must be the 32-character hex id of a run "
                           "(list recent ones with `stenographer trace`)")
    run.store.traces.flush()
    with run.store.read() as conn:
        trace = load_trace(conn, run_id)
    if trace is None:
        raise NotFound(f"no stored run {run_id!r} (traces are kept for the most recent "
                       "runs only)")
    return {"reply": TraceReply(trace=trace, runs=None)}


class RecentTracesWrites(TypedDict):
    reply: TraceReply


@node
def recent_traces(request: Any, *, run: RunContext) -> RecentTracesWrites:
    req = request or {}
    run.store.traces.flush()
    with run.store.read() as conn:
        runs = recent_runs(conn, int(req.get("limit", 20)), req.get("graph"))
    return {"reply": TraceReply(trace=None, runs=runs)}
