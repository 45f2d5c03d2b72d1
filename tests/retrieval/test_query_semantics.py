"""What a query means: FTS5 syntax when valid (phrases, prefixes, OR, NEAR), plain
language otherwise, the invalid-syntax fallback, the three modes, role and time
filters, and cursor pages without duplicates or gaps."""

from __future__ import annotations

import pytest

from stenographer.app import App
from store.errors import InvalidInput
from tests.retrieval.conftest import ids, ingest, search

MODES = ("keyword", "semantic", "hybrid")


@pytest.fixture
def turns(app: App) -> dict[str, int]:
    """One session of distinct turns (and a second session that must never leak in)."""
    made = {
        "phrase": ingest(app, "s", "We met the support group on Tuesday."),
        "apart": ingest(app, "s", "Group chat gave moral support to the team."),
        "paint": ingest(app, "s", "She is painting a lake at sunrise."),
        "near": ingest(app, "s", "The ledger entry was reconciled by finance."),
        "far": ingest(app, "s", "The ledger looked odd; much later, long after lunch, the "
                                "auditors came back and the entry was fixed."),
        "alpha": ingest(app, "s", "Alpha release notes are drafted."),
        "beta": ingest(app, "s", "Beta testers reported two crashes."),
    }
    made["other"] = ingest(app, "other", "A ledger entry and a support group elsewhere.")
    return made


def test_a_phrase_matches_only_its_words_in_order(app: App, turns: dict[str, int]):
    assert ids(search(app, '"support group"', mode="keyword")) == [turns["phrase"]]
    assert ids(search(app, '"group support"', mode="keyword")) == []


def test_a_prefix_matches_every_word_it_starts(app: App, turns: dict[str, int]):
    assert ids(search(app, "paint*", mode="keyword")) == [turns["paint"]]
    assert set(ids(search(app, "ledg* AND reconcil*", mode="keyword"))) == {turns["near"]}


def test_or_and_not_are_honoured(app: App, turns: dict[str, int]):
    assert set(ids(search(app, "alpha OR beta", mode="keyword"))) == {turns["alpha"],
                                                                      turns["beta"]}
    assert ids(search(app, "ledger NOT reconciled", mode="keyword")) == [turns["far"]]


def test_near_requires_the_words_close_together(app: App, turns: dict[str, int]):
    assert ids(search(app, "NEAR(ledger entry, 2)", mode="keyword")) == [turns["near"]]
    assert set(ids(search(app, "NEAR(ledger entry, 30)", mode="keyword"))) == {
        turns["near"], turns["far"]}


def test_caller_syntax_matches_the_turn_itself_not_its_neighbours_context(app: App):
    asked = ingest(app, "s", "Did the zebra crossing survey finish?")
    answer = ingest(app, "s", "Yes, yesterday evening.")  # its context holds zebra, survey
    plain = ids(search(app, "zebra survey", mode="keyword"))
    assert plain[:2] == [asked, answer]  # plain language: the answer is found by its question
    assert ids(search(app, '"zebra crossing"', mode="keyword")) == [asked]
    assert ids(search(app, "zebra*", mode="keyword")) == [asked]


def test_plain_language_ors_the_content_words(app: App, turns: dict[str, int]):
    result = search(app, "When did the beta testers report crashes?", mode="keyword")
    assert ids(result)[:1] == [turns["beta"]]
    assert result["notes"] == []
    # Every word need not match: one rare word is enough (the turn after it has the word
    # in its context, ranked below).
    assert ids(search(app, "what about the auditors, then?", mode="keyword"))[:1] == [
        turns["far"]]


@pytest.mark.parametrize("soup", ['"unbalanced ledger', "ledger) OR (", "NEAR(ledger entry, x",
                                  "* ledger", "ledger AND"])
def test_invalid_syntax_falls_back_to_the_words_and_says_so(app: App, turns: dict[str, int],
                                                            soup: str):
    result = search(app, soup, mode="keyword")
    assert set(ids(result)[:2]) == {turns["near"], turns["far"]}
    [note] = result["notes"]
    assert "not valid FTS5 syntax" in note and "searched for its words instead" in note
    assert f"Note: {note}" in result["reply"]["text"]


@pytest.mark.parametrize("escape", ["other) OR (ledger", "ledger) OR (other",
                                    "x) OR scope:s2 OR (ledger"])
def test_caller_syntax_cannot_reach_another_session(app: App, turns: dict[str, int],
                                                    escape: str):
    for mode in MODES:
        found = ids(search(app, escape, mode=mode))
        assert turns["other"] not in found, (escape, mode)


def test_each_mode_takes_its_own_path(app: App, turns: dict[str, int]):
    keyword = search(app, "ledger", mode="keyword")
    assert "vector" not in keyword["nodes"] and "provider" not in keyword["nodes"]
    semantic = search(app, "ledger", mode="semantic")
    assert "keyword" not in semantic["nodes"] and "terms" not in semantic["nodes"]
    hybrid = search(app, "ledger", mode="hybrid")
    assert {"keyword", "vector", "fuse", "answers", "page"} <= set(hybrid["nodes"])
    # Misspellings share no word (nor stem), but character trigrams: semantic and hybrid
    # find the turn.
    assert ids(search(app, "ledgr reconsiled", mode="keyword")) == []
    for mode in ("semantic", "hybrid"):
        assert ids(search(app, "ledgr reconsiled", mode=mode))[:1] == [turns["near"]]


def test_role_and_time_filters_apply_in_every_mode(app: App):
    made = [ingest(app, "f", f"quarterly ledger review number {i}",
                   role=("user", "assistant")[i % 2], created_at=f"2025-03-{10 + i:02d}T09:00:00Z")
            for i in range(6)]
    for mode in MODES:
        def found(mode: str = mode, **filters: str) -> set[int]:
            return set(ids(search(app, "quarterly ledger review", "f", mode=mode, limit=50,
                                  **filters)))

        assert found(role="assistant") == set(made[1::2]), mode
        assert found(since="2025-03-12") == set(made[2:]), mode  # inclusive
        assert found(until="2025-03-12") == set(made[:2]), mode  # exclusive
        assert found(since="2025-03-11", until="2025-03-14", role="user") == {made[2]}, mode
        assert found(since="2031-01-01") == set(), mode


def test_a_filter_also_holds_for_answers_lent_a_questions_score(app: App):
    asked = ingest(app, "qa", "Which database did the platform team pick?", role="user")
    answer = ingest(app, "qa", "Postgres, after the load test.", role="assistant")
    hybrid = ids(search(app, "which database did the platform team pick", "qa"))
    assert hybrid[:2] == [asked, answer]
    only_users = ids(search(app, "which database did the platform team pick", "qa",
                            role="user"))
    assert only_users == [asked]


@pytest.mark.parametrize("mode", MODES)
def test_cursor_pages_have_no_duplicates_or_gaps(app: App, mode: str):
    for i in range(23):  # equal scores in groups: the cursor must break ties by id
        ingest(app, "p", "sprint retro finding " + "detail " * (i % 4))
    query = {"mode": mode}
    whole = ids(search(app, "sprint retro finding", "p", limit=50, **query))
    assert len(whole) == 23
    seen: list[int] = []
    cursor = None
    for _ in range(10):
        page = search(app, "sprint retro finding", "p", limit=4, cursor=cursor, **query)
        assert len(page["hits"]) <= 4
        assert page["total"] == 23  # every page counts the whole query
        seen += ids(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == whole


def test_a_cursor_belongs_to_its_query(app: App, turns: dict[str, int]):
    page = search(app, "ledger", limit=1, mode="keyword")
    assert page["next_cursor"]
    with pytest.raises(InvalidInput, match="different query"):
        search(app, "ledger", limit=1, mode="hybrid", cursor=page["next_cursor"])
