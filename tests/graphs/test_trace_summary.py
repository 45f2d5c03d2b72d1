"""A stage trace says what each stage did by the kind and size of what it wrote (counts,
lengths, ids, scores), never by text: the trace returned and the one stored hold no turn
content, no neighbour's words, no query, no reply text and no error message (messages
may quote the input)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphs.summary import error_summary, value_summary
from stenographer.app import App, open_app
from stenographer.settings import Settings
from store.errors import InvalidInput, NotFound
from store.runs import load_trace

MARKER = "VelqorianThistlebrook"  # an unusual mixed-case word only these turns hold


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    app = open_app(Settings(data_dir=tmp_path, turn_limit=3))
    try:
        yield app
    finally:
        app.close()


def stored(app: App, trace: dict[str, Any]) -> dict[str, Any]:
    app.store.traces.flush()
    with app.store.read() as conn:
        found = load_trace(conn, trace["run_id"])
    assert found == trace
    return found


def writes(trace: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {s["node"]: s["writes"] for s in trace["stages"]}


def holds_no_text(trace: dict[str, Any], *texts: str) -> bool:
    dumped = json.dumps(trace, ensure_ascii=False).lower()
    return not any(t.lower() in dumped for t in texts)


def test_ingest_and_search_traces_describe_each_stage_without_text(app: App):
    first = f"Decision: the {MARKER} rollout goes first, said the release owner."
    out, _ = app.run("ingest", {"role": "user", "content": first, "session_id": "s"})
    second = "The follow-up turn borrows its neighbour's words into its keyword entry."
    out, trace = app.run("ingest", {"role": "assistant", "content": second,
                                    "session_id": "s"})
    assert holds_no_text(stored(app, trace), MARKER, "rollout", "follow-up", "release owner")
    by_node = writes(trace)
    assert f"content: str[{len(second)}]" in by_node["validate"]["turn"]
    assert by_node["fields"]["fields"].startswith("{context: str[")  # the borrowed words
    assert f"exchange_id: {out['reply']['exchange_id']}" in by_node["store"]["recorded"]
    assert by_node["reply"]["reply"].startswith("{text: str[")

    query = f"why did we choose the {MARKER} rollout?"
    out, trace = app.run("search", {"query": query, "session_id": "s"})
    assert out["hits"] and holds_no_text(stored(app, trace), MARKER, "rollout", "choose")
    by_node = writes(trace)
    assert by_node["validate"]["query"].startswith(f"{{text: str[{len(query)}], mode: str[6]")
    assert by_node["page"]["hits"] == f"[{len(out['hits'])} items]"
    assert by_node["page"]["total"] == str(out["total"])

    out, trace = app.run("guard", {"session_id": "s", "query": MARKER})
    assert holds_no_text(stored(app, trace), MARKER)
    assert writes(trace)["reply"]["reply"].startswith(
        f"{{markdown: str[{len(out['reply']['markdown'])}]")


def test_a_failed_run_records_the_error_kind_not_its_message(app: App):
    with pytest.raises(InvalidInput, match=MARKER) as caught:  # the caller gets the message
        app.run("ingest", {"role": MARKER, "content": "x", "session_id": "s"})
    trace = stored(app, caught.value.stage_trace)  # type: ignore[attr-defined]
    assert holds_no_text(trace, MARKER)
    assert trace["stages"][-1]["error"] == (
        f"InvalidInput: steno.invalid_input, message str[{len(str(caught.value))}]")
    app.run("ingest", {"role": "user", "content": "x", "session_id": "s"})
    with pytest.raises(NotFound) as missing:
        app.run("milestone", {"session_id": "s", "exchange_id": 10**9, "label": MARKER})
    trace = stored(app, missing.value.stage_trace)  # type: ignore[attr-defined]
    assert trace["stages"][-1]["error"].startswith(
        "NotFound: steno.not_found, exchange #1000000000, message str[")


@dataclasses.dataclass
class Batch:
    turns_read: int
    names: dict[str, int]


@pytest.mark.parametrize(("value", "summary"), [
    (None, "null"), (True, "true"), (42, "42"), (0.25, "0.25"),
    (MARKER, f"str[{len(MARKER)}]"), (MARKER.encode(), f"bytes[{len(MARKER)}]"),
    ([], "[]"), ([MARKER, MARKER], "[2 items]"), ((1, 2, 3), "[3 items]"),
    ({MARKER}, "[1 item]"), ({}, "{}"),
    ({"id": 7, "text": MARKER, "tags": [MARKER]}, "{id: 7, text: str[21], tags: [1 item]}"),
    ({"graph": {"a": 1, "b": 2}, "empty": {}}, "{graph: {2 fields}, empty: {}}"),
    ({MARKER: 1, "two words": 2, 3: 4}, "{str[21]: 1, str[9]: 2, 3: 4}"),
    (Batch(30, {MARKER: 1}), "Batch(turns_read=30, names={1 field})"),
    (object(), "object"),
])
def test_a_value_is_summarised_by_its_kind(value: Any, summary: str):
    assert value_summary(value) == summary


def test_a_long_summary_is_cut_and_an_error_keeps_no_message():
    many = {f"field_{i}": i for i in range(100)}
    assert len(value_summary(many)) == 80 and value_summary(many).endswith("…")
    assert error_summary(KeyError(MARKER)) == f"KeyError: message str[{len(MARKER) + 2}]"
