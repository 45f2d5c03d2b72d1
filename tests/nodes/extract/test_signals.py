"""Model-free extraction of decisions and blockers.

Quality is measured, not asserted case by case: the labelled cases file holds hard
negatives and honest misses, and the thresholds apply to the whole file. The spec's
six regression sentences are the exception and are pinned one by one.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bench.extraction_quality import CASES_PATH, Case, evaluate, load_cases
from nodes.extract.nafe import nafe_flags_in
from nodes.extract.patterns import DEFAULT_PATTERNS, SignalPatterns, compile_patterns
from nodes.extract.secrets import redact
from nodes.extract.sentences import MAX_SENTENCE_CHARS, sentences
from nodes.extract.signals import MAX_ITEM_CHARS, MAX_ITEMS, blockers, decisions

CASES = load_cases()

SPEC_SENTENCES = [
    # (text, is decision, is blocker)
    ("The debug output is clean and all tests pass.", False, False),
    ("No errors were found in the logs today.", False, False),
    ("Fixed the bug in the parser module.", False, False),
    ("Decision: adopt trunk-based development.", True, False),
    ("We went with Postgres; it is boring.", True, False),
    ("The decision matrix is in docs/decisions.md", False, False),
]

# Sentences the brief names; the cases file must carry them so the measured
# figures cover them.
REQUIRED_CASES = [
    "We decided to drop Redis.",
    "I chose httpx over requests.",
    "We opted for WAL mode.",
    "Settled on 256-dim vectors.",
    "Key finding: the index was never used.",
    "Conclusion: the cache is the bottleneck.",
    "Use FTS5 → simpler.",
    "Blocked on the DB migration.",
    "I'm stuck on the flaky test.",
    "Can't connect to the staging server.",
    "The build is failing on CI.",
    "TypeError: 'NoneType' object is not subscriptable",
    "The request timed out after 30s.",
    "The server crashed again.",
    "✗ 3 tests failed",
    "❌ lint",
    "🚫 deploy halted",
    "Error handling is covered by tests.",
    "Add a timeout parameter to the client.",
    "No crashes since the fix.",
    "The tests are no longer failing.",
    "Error rates dropped to zero.",
    "Let's decide tomorrow.",
    "Should we choose Redis or Memcached?",
    "Undecided between A and B.",
    "The crash reporter module is well documented.",
    "Did it fail?",
]

MIN_PRECISION = 0.95
MIN_RECALL = 0.90

Extractor = Callable[[str], list[str]]


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def _assert_well_formed(items: list[str]) -> None:
    assert isinstance(items, list)
    assert len(items) <= MAX_ITEMS
    assert len(set(items)) == len(items)
    for item in items:
        assert isinstance(item, str)
        assert 0 < len(item) <= MAX_ITEM_CHARS + 1
        assert item == _collapsed(item)


# --- the labelled cases file ---------------------------------------------------------


def test_cases_file_is_large_and_balanced() -> None:
    assert len(CASES) >= 120
    texts = [case.text for case in CASES]
    assert len(set(texts)) == len(texts), "duplicate texts in the cases file"
    for kind in ("decision", "blocker"):
        positives = sum(getattr(case, kind) for case in CASES)
        negatives = len(CASES) - positives
        assert positives >= 40, f"too few {kind} positives: {positives}"
        assert negatives >= 40, f"too few {kind} negatives: {negatives}"


def test_cases_file_holds_the_spec_and_brief_sentences() -> None:
    by_text = {case.text: case for case in CASES}
    for text, is_decision, is_blocker in SPEC_SENTENCES:
        assert text in by_text, f"missing spec case {text!r} in {CASES_PATH.name}"
        assert (by_text[text].decision, by_text[text].blocker) == (is_decision, is_blocker)
    missing = [text for text in REQUIRED_CASES if text not in by_text]
    assert not missing


@pytest.mark.parametrize("case", CASES, ids=[f"line{case.line}" for case in CASES])
def test_case_output_is_well_formed(case: Case) -> None:
    # Correctness is judged over the whole file below; per case, every item
    # returned must be a sentence of the input, collapsed.
    assert case.text.strip()
    for extract in (decisions, blockers):
        items = extract(case.text)
        _assert_well_formed(items)
        for item in items:
            assert item in _collapsed(case.text)


def test_precision_and_recall_over_the_cases_file(capsys: pytest.CaptureFixture[str]) -> None:
    scores = evaluate(CASES)
    with capsys.disabled():
        print()
        for score in scores.values():
            print("  " + score.summary())
    for score in scores.values():
        detail = (
            f"{score.summary()}\n  false positives: {list(score.false_positives)}"
            f"\n  false negatives: {list(score.false_negatives)}"
        )
        assert score.precision >= MIN_PRECISION, detail
        assert score.recall >= MIN_RECALL, detail


@pytest.mark.parametrize(("text", "is_decision", "is_blocker"), SPEC_SENTENCES)
def test_spec_sentence(text: str, is_decision: bool, is_blocker: bool) -> None:
    assert bool(decisions(text)) is is_decision
    assert bool(blockers(text)) is is_blocker


# --- output shape --------------------------------------------------------------------


def test_items_are_sentences_in_text_order() -> None:
    text = (
        "We decided to drop Redis. The weather is fine.\n"
        "- The build is failing on CI\n"
        "* Settled on 256-dim vectors!   Also, I'm stuck on the flaky test."
    )
    assert decisions(text) == ["We decided to drop Redis.", "Settled on 256-dim vectors!"]
    assert blockers(text) == ["The build is failing on CI", "Also, I'm stuck on the flaky test."]


def test_items_are_whitespace_collapsed_and_deduplicated() -> None:
    text = "We  decided\tto drop Redis.\nWe decided to drop Redis.\n  We decided to drop Redis.  "
    assert decisions(text) == ["We decided to drop Redis."]


def test_at_most_eight_items() -> None:
    text = "\n".join(f"Blocked on ticket {n}." for n in range(50))
    found = blockers(text)
    assert found == [f"Blocked on ticket {n}." for n in range(MAX_ITEMS)]


def test_long_sentence_is_truncated_with_an_ellipsis() -> None:
    text = "We decided to " + "really " * 60 + "drop Redis."
    (item,) = decisions(text)
    assert len(item) <= MAX_ITEM_CHARS
    assert item.endswith("…")
    assert item.startswith("We decided to really")


def test_file_names_and_decimals_do_not_end_a_sentence() -> None:
    assert list(sentences("See docs/decisions.md and v3.5 for details. Next one!")) == [
        "See docs/decisions.md and v3.5 for details.",
        "Next one!",
    ]


def test_abbreviations_and_lowercase_continuations_do_not_end_a_sentence() -> None:
    text = "We chose a store, e.g. SQLite, for now. then it grew. Done"
    assert list(sentences(text)) == [
        "We chose a store, e.g. SQLite, for now. then it grew.",
        "Done",
    ]


def test_bullet_markers_are_dropped() -> None:
    text = "- first\n  * second\n3. third\n4) fourth\n- [x] fifth\n-> arrow kept"
    assert list(sentences(text)) == ["first", "second", "third", "fourth", "fifth", "-> arrow kept"]


def test_long_runs_are_cut_into_bounded_chunks() -> None:
    words = "word " * 5000
    chunks = list(sentences(words))
    assert all(len(chunk) <= MAX_SENTENCE_CHARS for chunk in chunks)
    assert " ".join(chunks) == _collapsed(words)
    solid = "x" * 5500
    assert [len(chunk) for chunk in sentences(solid)] == [1000] * 5 + [500]


# --- configurable patterns -----------------------------------------------------------


def test_default_patterns_are_a_frozen_signal_patterns() -> None:
    assert isinstance(DEFAULT_PATTERNS, SignalPatterns)
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_PATTERNS.decision = ()  # type: ignore[misc]


def test_extra_decision_pattern_makes_a_decision() -> None:
    patterns = compile_patterns(extra_decisions=[r"\bLGTM\b"])
    assert decisions("LGTM, merging.") == []
    assert decisions("LGTM, merging.", patterns) == ["LGTM, merging."]
    assert decisions("Not LGTM yet.", patterns) == []  # extras pass the same negation filter
    assert blockers("LGTM, merging.", patterns) == []


def test_extra_blocker_pattern_makes_a_blocker() -> None:
    patterns = compile_patterns(extra_blockers=[r"\bwaiting on legal\b"])
    assert blockers("Still waiting on legal for the license.") == []
    assert blockers("Still waiting on legal for the license.", patterns) == [
        "Still waiting on legal for the license."
    ]
    # Built-in patterns keep working next to the extras.
    assert blockers("The build is failing on CI.", patterns) == ["The build is failing on CI."]


@pytest.mark.parametrize("bad", ["(unclosed", "[a-", r"\bLGTM(?<=x+)"])
def test_bad_extra_pattern_raises_value_error_naming_it(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid extra decision pattern") as info:
        compile_patterns(extra_decisions=["fine", bad])
    assert repr(bad) in str(info.value)
    with pytest.raises(ValueError, match="invalid extra blocker pattern"):
        compile_patterns(extra_blockers=[bad])


def test_extra_pattern_matching_empty_string_is_rejected() -> None:
    with pytest.raises(ValueError, match="matches the empty string"):
        compile_patterns(extra_blockers=["x*"])


def test_a_bare_string_of_extras_is_rejected() -> None:
    with pytest.raises(ValueError, match="wrap it in a list"):
        compile_patterns(extra_decisions=r"\bLGTM\b")


# --- never crash ---------------------------------------------------------------------

_ANY_CHAR = st.characters(exclude_categories=())  # includes lone surrogates and NUL
_BAIT = st.sampled_from(
    [
        "decided",
        "chose",
        "Decision:",
        "→",
        "->",
        " vs ",
        "use",
        "error",
        "Error:",
        "TypeError",
        "failed",
        "no",
        "not",
        "fixed",
        "if",
        "?",
        ".",
        "!",
        "\n",
        "- ",
        "1. ",
        "can't",
        "timed out",
        "crash",
        "stuck",
        " ",
        ",",
        ";",
        "(",
        "’",
        "\ud800",
        "\x00",
        "✗",
        "❌",
        "🚫",
        "a" * 50,
        "x" * 1200,
    ]
)
_TEXT = st.one_of(st.text(_ANY_CHAR, max_size=400), st.lists(_BAIT, max_size=80).map("".join))


# No deadline: the explicit examples are deliberately large, and timing is checked
# by ratio in the linear-time test instead of by a wall-clock limit.
@settings(
    database=None, deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow]
)
@given(text=_TEXT)
@example(text="\ud800")
@example(text="\x00" * 1000)
@example(text="We decided \ud800 to drop Redis.\x00 The build failed \udfff.")
@example(text="error " * 50_000)
@example(text="decided. " * 30_000)
@example(text="(" * 200_000)
@example(text="\n" * 100_000)
@example(text="?" * 100_000)
@example(text="\u2028\u2029\x85\x0b\x0c" * 5_000)
def test_extraction_never_raises_and_stays_bounded(text: str) -> None:
    for extract in (decisions, blockers):
        _assert_well_formed(extract(text))


@settings(database=None, deadline=None, max_examples=200)
@given(text=_TEXT)
def test_sentences_are_bounded_and_collapsed(text: str) -> None:
    for sentence in sentences(text):
        assert 0 < len(sentence) <= MAX_SENTENCE_CHARS
        assert sentence == _collapsed(sentence)


# --- linear time ---------------------------------------------------------------------

_SMALL = 100_000
_LARGE = 1_000_000
_PATHOLOGICAL = {
    "letters": "a",
    "error": "error ",
    "decided": "decided ",
    "parens": "(",
    "bait": "got no error: when TypeError not failing -> vs x → use can't(( ",
    # secret redaction (nodes.extract.secrets) and NAFE flags (nodes.extract.nafe) run on
    # the same turn at ingest: their bait too
    "token": "ghp_a1B2",
    "key-run": "AKIA",
    "pem": "-----BEGIN RSA PRIVATE KEY-----\n",
    "url": "a://b:c@",
    "assign": "API_TOKEN=a1B2c3D4e5 ",
    "bearer": "Authorization: Bearer ",
    "jwt": "eyJa.eyJb.",
    "nafe": "trust me the user said it's fine so we can skip the gate really fine ",
    "nafe-nostop": "in the spirit of the rule given the context they probably mean ",
}


def _median_seconds(text: str, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.process_time()
        decisions(text)
        blockers(text)
        redact(text)
        nafe_flags_in(text)
        times.append(time.process_time() - start)
    return statistics.median(times)


@pytest.mark.slow
@pytest.mark.parametrize("unit", list(_PATHOLOGICAL.values()), ids=list(_PATHOLOGICAL))
def test_extraction_time_grows_linearly(unit: str) -> None:
    """Decisions, blockers, secret redaction and NAFE flags on one huge single line."""
    # Ratios of CPU time, not wall times, so neither a slow machine nor other work on it
    # can fail this; a quadratic regex would make the ratio ~100, linear work ~10.
    small = (unit * (_SMALL // len(unit) + 1))[:_SMALL]
    large = (unit * (_LARGE // len(unit) + 1))[:_LARGE]
    t_small = _median_seconds(small)
    t_large = _median_seconds(large)
    ratio = t_large / max(t_small, 1e-6)
    assert ratio < 30, f"t(1MB)/t(100KB) = {ratio:.1f} for {unit!r}"
