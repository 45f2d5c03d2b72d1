"""A time in a reply: epoch seconds as ``strftime``'s ``%Y-%m-%dT%H:%M:%SZ`` of the same
datetime, which ``iso`` puts together from the fields instead."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.evaluate_contracts.inputs import iso

FIRST, LAST = -62135596800 + 86400, 253402300799 - 86400  # years 1 to 9999, a day in


def by_strftime(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@settings(max_examples=3000, deadline=None)
@given(seconds=st.one_of(st.floats(FIRST, LAST), st.integers(FIRST, LAST),
                         st.floats(0, 4e9)))
def test_iso_is_strftime(seconds: float) -> None:
    assert iso(seconds) == by_strftime(seconds)


def test_iso_edges() -> None:
    """Years below 1000 (unpadded by ``%Y``), a second's last microsecond, midnight."""
    cases = [FIRST, -30610224000.0, -30610224000.0 - 1e-6, 0.0, 0.999999, 59.9999999,
             1764000000.9999, 86399.999999, 951782400.0, LAST]
    for seconds in cases:
        assert iso(seconds) == by_strftime(seconds), seconds
    assert iso(FIRST) == "1-01-02T00:00:00Z" == by_strftime(FIRST)
