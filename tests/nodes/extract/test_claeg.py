"""A bus event as the system turn that records it: source, time, text, milestone label
and the per-event source key (nodes.extract.claeg)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nodes.extract.claeg import MILESTONE, SOURCE_KEY_PREFIX, event_time, shutdown_of

NOW = 1_796_000_000.0
AT = 1_795_996_800.0  # 2026-11-30T00:00:00Z


def event(payload: Any, created_at: Any = "2026-11-30T00:00:00Z", id: Any = 7,
          task: str = "task-1") -> dict[str, Any]:
    raw = payload if isinstance(payload, str) or payload is None else json.dumps(payload)
    return {"id": id, "task_id": task, "payload": raw, "created_at": created_at}


@pytest.mark.parametrize("raw, seconds", [
    ("2026-11-30T00:00:00Z", AT),
    ("2026-11-30T00:00:00+00:00", AT),
    ("2026-11-30T01:00:00+01:00", AT),
    ("2026-11-30 00:00:00", AT),  # no zone: UTC
    (AT, AT),
    (int(AT), AT),
    (AT * 1_000, AT),  # milliseconds
    ("yesterday", NOW),
    (None, NOW),
    (True, NOW),
    (float("nan"), NOW),
    (-5, NOW),
])
def test_event_time(raw: Any, seconds: float):
    assert event_time(raw, NOW) == seconds


def test_the_turn_says_what_the_bus_said():
    s = shutdown_of(event({"source": "omega-brain", "reason": "drift budget exhausted",
                           "claeg_state": "TERMINAL_SHUTDOWN"}), NOW)
    assert s.source == "omega-brain" and s.at == AT and s.event_id == 7
    assert s.content.startswith("CLAEG_TERMINAL_SHUTDOWN of task task-1: ")
    assert "from omega-brain at 2026-11-30T00:00:00Z (bus event 7)" in s.content
    assert "Reason: drift budget exhausted" in s.content
    assert 'Payload: {"claeg_state": "TERMINAL_SHUTDOWN"}' in s.content
    assert s.label == f"{MILESTONE} from omega-brain at 2026-11-30T00:00:00Z"
    assert s.source_key.startswith(f"{SOURCE_KEY_PREFIX}7:")


@pytest.mark.parametrize("payload, source, fragment", [
    (None, "unknown", None),
    ({}, "unknown", None),
    ("not json {", "unknown", "Payload: not json {"),
    ([1, 2], "unknown", "Payload: [1, 2]"),
    ({"source": "a\nb\x00c" + "x" * 200}, "a b c" + "x" * 74 + "…", None),
    ({"source": 42, "message": "stopped"}, "42", "Reason: stopped"),
    ({"source": "a | b"}, "a / b", None),
    ({"source": "   "}, "unknown", None),
])
def test_odd_payloads_still_make_a_turn(payload: Any, source: str, fragment: str | None):
    s = shutdown_of(event(payload), NOW)
    assert s.source == source and len(s.source) <= 80
    assert "\n" not in s.label and len(s.label) <= 200
    if fragment is not None:
        assert fragment in s.content


def test_the_payload_is_bounded():
    s = shutdown_of(event({"source": "x", "blob": "y" * 50_000}), NOW)
    assert len(s.content) < 2_500


def test_one_source_key_per_event():
    key = shutdown_of(event({"source": "x"}), NOW).source_key
    assert shutdown_of(event({"source": "changed"}), NOW).source_key == key
    # A recreated bus numbers its events from 1 again: another time, another key.
    assert shutdown_of(event({}, created_at="2026-12-01T00:00:00Z"), NOW).source_key != key
    assert shutdown_of(event({}, id=8), NOW).source_key != key
    assert shutdown_of(event({}, task="task-2"), NOW).source_key != key
    assert len(shutdown_of(event({}, id="e" * 5_000), NOW).source_key) < 200
