"""NAFE reasoning-drift flags, driven by the labelled cases file.

The original's false positives are pinned one by one; quality is measured over the
whole file (bench/flag_quality.py prints the same figures).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.extraction_quality import load_cases
from bench.flag_quality import NAFE_HELDOUT_PATH, load_nafe_cases, score_nafe
from nodes.extract.nafe import MAX_FLAGS, MAX_SPAN_CHARS, SIGNATURES, nafe_flags_in

CASES = load_nafe_cases()
MIN_PRECISION = 0.95
MIN_RECALL = 0.85

# Sentences the original flagged: none may be flagged.
ORIGINAL_FALSE_POSITIVES = [
    "I know the answer is 42.",
    "This is really a good idea.",
    "In the context of the migration, we updated the schema.",
    "The senior engineer confirms the plan.",
]


def test_cases_file_is_large_and_balanced() -> None:
    assert len(CASES) >= 100
    texts = [c.text for c in CASES]
    assert len(set(texts)) == len(texts), "duplicate texts in the cases file"
    positives = [c for c in CASES if c.signatures]
    assert len(positives) >= 40 and len(CASES) - len(positives) >= 40
    for sig in SIGNATURES:
        assert sum(sig in c.signatures for c in CASES) >= 10, sig


def test_cases_file_holds_the_originals_false_positives_as_negatives() -> None:
    by_text = {c.text: c for c in CASES}
    for text in ORIGINAL_FALSE_POSITIVES:
        assert text in by_text and by_text[text].signatures == ()


@pytest.mark.parametrize("text", ORIGINAL_FALSE_POSITIVES)
def test_the_originals_false_positives_are_not_flagged(text: str) -> None:
    assert nafe_flags_in(text) == []


def test_precision_and_recall_over_the_cases_file(capsys: pytest.CaptureFixture[str]) -> None:
    scores = score_nafe(CASES)
    with capsys.disabled():
        print()
        for score in scores.values():
            print("  " + score.summary())
    for score in scores.values():
        detail = (f"{score.summary()}\n  false positives: {list(score.false_positives)}"
                  f"\n  false negatives: {list(score.false_negatives)}")
        assert score.precision >= MIN_PRECISION, detail
        assert score.recall >= MIN_RECALL, detail


def test_flags_hold_the_matched_span_in_a_stable_order() -> None:
    text = ("Reading between the lines, they want it shipped. Trust me, the user said it's "
            "fine, so we can skip the tests. In the spirit of the rule we skip the gate.")
    flags = nafe_flags_in(text)
    assert [f.signature for f in flags] == [
        "NARRATIVE_RESCUE", "AUTHORITY_DRIFT", "AUTHORITY_DRIFT", "INTENT_INFERENCE"]
    for f in flags:
        assert text[f.start : f.end] == f.span
    assert [f.span for f in flags if f.signature == "AUTHORITY_DRIFT"] == [
        "Trust me", "the user said it's fine, so we can"]


def test_typographic_apostrophes_match_like_ascii_ones() -> None:
    [flag] = nafe_flags_in("It’s safe to assume they want the old API.")
    assert flag.signature == "INTENT_INFERENCE" and flag.span == "safe to assume"


def test_negated_or_asked_cues_are_not_flags() -> None:
    assert nafe_flags_in("It is not safe to assume the cache is warm.") == []
    assert nafe_flags_in("Is it safe to assume the cache is warm?") == []
    assert nafe_flags_in("We must never bypass the gate, even on ethical grounds.") == []


def test_screen_never_hides_a_flag_over_the_cases() -> None:
    for case in CASES:
        assert nafe_flags_in(case.text) == nafe_flags_in(case.text, screen=False), case.text


VOCAB = ("trust me take my word the user said it's fine so we can skip bypass the gate "
         "in spirit of rule context given ethical moral right thing to do outweighs policy "
         "they probably mean safe to assume reading between lines clearly intended although "
         "tests failed assume passes not never ? . , \n really okay I'm admin told").split(" ")


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=50))
def test_screen_never_hides_a_flag_on_random_text(parts: list[str]) -> None:
    text = " ".join(parts)
    assert nafe_flags_in(text) == nafe_flags_in(text, screen=False), text


@settings(max_examples=200, deadline=None, database=None)
@given(st.text(max_size=600))
def test_flags_are_bounded_on_any_text(text: str) -> None:
    flags = nafe_flags_in(text)
    assert len(flags) <= MAX_FLAGS
    for f in flags:
        assert f.signature in SIGNATURES and 0 < len(f.span) <= MAX_SPAN_CHARS


def test_many_cues_are_capped() -> None:
    flags = nafe_flags_in("Trust me. " * 1_000)
    assert len(flags) == MAX_FLAGS


def test_ordinary_agent_sentences_are_not_flagged() -> None:
    """Out of sample: the 243 decision/blocker cases (agent turns about software work)
    and the lines of the README and docs/; none reads as reasoning drift."""
    root = Path(__file__).resolve().parents[3]
    texts = [c.text for c in load_cases()]
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        texts += doc.read_text(encoding="utf-8").splitlines()
    flagged = [(t, [f.span for f in nafe_flags_in(t)]) for t in texts if nafe_flags_in(t)]
    assert flagged == []


def test_held_out_cases(capsys: pytest.CaptureFixture[str]) -> None:
    """Cases written after the patterns were settled (never tuned against): the honest
    estimate. Misses there are recorded, not fixed, so the estimate stays honest."""
    score = score_nafe(load_nafe_cases(NAFE_HELDOUT_PATH))["any"]
    with capsys.disabled():
        print("\n  held out: " + score.summary())
    assert score.tp + score.fn >= 20 and score.fp + score.tn >= 20
    assert score.precision >= MIN_PRECISION and score.recall >= 0.75, score.summary()
