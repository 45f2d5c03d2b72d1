"""A blocker stays open until a later turn says it is fixed, about the same thing."""

from __future__ import annotations

import pytest

from nodes.extract.resolutions import fix_statements, resolutions

# (blocker, a later turn, whether the later turn closes the blocker)
CASES = [
    ("I'm stuck on the flaky test.", "The flaky test was fixed by seeding the RNG.", True),
    ("The test suite hangs at test_stdio_roundtrip.",
     "Fixed the hang in test_stdio_roundtrip: the reader now closes the pipe.", True),
    ("The upload keeps failing with HTTP 413.",
     "Resolved the 413: the proxy's body limit is 50 MB now.", True),
    ("Can't connect to the staging server.", "The staging server connection is fixed.", True),
    ("The build is failing on CI.", "The CI build is fixed.", True),
    ("Every call to search raises a KeyError when the session is empty.",
     "This patch fixes the KeyError in search.", True),
    ("The deploy is blocked.", "Turn #7 is resolved: the deploy runs again.", True),
    # Not a resolution: negated, planned, tried, asked, or about something else.
    ("I'm stuck on the flaky test.", "The flaky test is not fixed yet.", False),
    ("I'm stuck on the flaky test.", "Let's fix the flaky test tomorrow.", False),
    ("I'm stuck on the flaky test.", "I'm trying to fix the flaky test.", False),
    ("I'm stuck on the flaky test.", "Did you fix the flaky test?", False),
    ("I'm stuck on the flaky test.", "We will fix the flaky test after the release.", False),
    ("The upload keeps failing with HTTP 413.", "Fixed the typo in the README.", False),
    ("The build is failing on CI.", "Fixed the CI cache key.", False),
    ("Can't connect to the staging server.", "The prefix of the fixture is new.", False),
]


@pytest.mark.parametrize(("blocker", "later", "closes"), CASES)
def test_a_later_fix_statement_about_the_same_thing_closes_a_blocker(
        blocker: str, later: str, closes: bool):
    found = resolutions([(7, blocker)], fix_statements(9, later))
    assert (found[0] is not None) is closes
    if closes:
        assert found[0] is not None and found[0].turn_id == 9


def test_only_a_later_turn_closes_a_blocker_and_the_first_one_is_cited():
    fixes = (fix_statements(3, "Fixed the flaky test_sync_pull.")
             + fix_statements(12, "The flaky test_sync_pull is fixed for good now.")
             + fix_statements(20, "Fixed test_sync_pull again."))
    found = resolutions([(5, "test_sync_pull is flaky again."), (25, "test_sync_pull broke.")],
                        fixes)
    assert found[0] is not None and found[0].turn_id == 12
    assert found[1] is None  # stated after every fix: still open


def test_fix_statements_keep_the_sentences_that_say_something_was_fixed():
    text = ("Looked at the logs. Fixed the race in the cursor update. Is the retry fixed? "
            "We still need to fix the docs.")
    assert [s.text for s in fix_statements(1, text)] == ["Fixed the race in the cursor update."]
    assert fix_statements(1, "Nothing about repairs here.") == []


def test_a_fix_closes_the_blocker_it_is_most_about_not_every_similar_one():
    blockers = [(3, "The osprey exporter build is failing on CI."),
                (4, "The kestrel exporter build is failing on CI."),
                (5, "The osprey exporter build is failing on CI.")]  # said again
    found = resolutions(blockers, fix_statements(9, "The osprey exporter build is fixed now."))
    assert [f is not None for f in found] == [True, False, True]
