"""The trigger-word screen must never hide a sentence that the full cue scan finds.

The screen skips the per-cue regex scan for turns without any trigger word; it is
only sound if every built-in cue needs one of those words. Checked over the labelled
cases and random text built from cue words, stop words and punctuation.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.extraction_quality import load_cases
from nodes.extract import signals
from nodes.extract.patterns import DEFAULT_PATTERNS as P


def full_decisions(text: str) -> list[str]:
    return signals._matching_sentences(
        text, lambda probe: signals._has_live_cue(probe, P.decision, P.decision_negation, None)
    )


def full_blockers(text: str) -> list[str]:
    return signals._matching_sentences(
        text,
        lambda probe: signals._has_live_cue(
            probe, P.blocker, P.blocker_negation, P.blocker_resolution
        ),
    )


@pytest.mark.parametrize("case", load_cases(), ids=lambda c: c.text[:40])
def test_screen_is_sound_on_cases(case: object) -> None:
    text = case.text  # type: ignore[attr-defined]
    if full_decisions(text):
        assert signals.may_hold_decision(text)
    if full_blockers(text):
        assert signals.may_hold_blocker(text)


VOCAB = (
    "we decided to use went with chose opted settled on picked up Decision: Key finding: "
    "→ -> => vs the build is failing blocked stuck cannot can't unable to error Error: "
    "TypeError: crashed timed out traceback not work broken hangs OOM exit code 1 ✗ ❌ "
    "got an error hit a timeout there is a bug doesn't start flaky is red deploy redis "
    "postgres cache index tests pass no errors fixed the and a of . ? ! \n"
).split(" ")


@settings(max_examples=400, deadline=None, database=None)
@given(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=40))
def test_screen_is_sound_on_random_text(parts: list[str]) -> None:
    text = " ".join(parts)
    if full_decisions(text):
        assert signals.may_hold_decision(text), text
    if full_blockers(text):
        assert signals.may_hold_blocker(text), text


def _needs_hold(text: str) -> None:
    """Every cue that matches an ASCII sentence finds one of its necessary strings
    there (signals._needs), so skipping a cue without them changes nothing."""
    probe = text.replace("’", "'")
    if not probe.isascii():
        return
    lowered = probe.lower()
    for cue in P.decision + P.blocker:
        needs = signals._needs(cue)
        if needs is not None and cue.search(probe):
            assert any(part in lowered for part in needs), (cue.pattern, text)


@pytest.mark.parametrize("case", load_cases(), ids=lambda c: c.text[:40])
def test_cue_needs_are_sound_on_cases(case: object) -> None:
    _needs_hold(case.text)  # type: ignore[attr-defined]


@settings(max_examples=400, deadline=None, database=None)
@given(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=40))
def test_cue_needs_are_sound_on_random_text(parts: list[str]) -> None:
    _needs_hold(" ".join(parts))


def test_cue_needs_are_read_from_the_regex() -> None:
    from nodes.extract.patterns import compile_patterns

    extra = compile_patterns(extra_blockers=[r"\bLGTM\b", r"(?:red|green)+ builds?",
                                             r"\d+ flakes?|(?:ci)? stalls"])
    assert signals._needs(extra.blocker[-3]) == ("lgtm",)
    assert signals._needs(extra.blocker[-2]) == (" build",)  # longer than "red"
    assert signals._needs(extra.blocker[-1]) == (" flake", " stalls")
    assert signals._needs(P.blocker[-1]) is None  # non-ASCII marks: the regex decides
