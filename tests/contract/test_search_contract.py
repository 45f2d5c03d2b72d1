"""The search contract (stenographer_query_history) on both backends: the same
tests on the SQLite file and on a PostgreSQL database (the ``database_url`` fixture).

Natural-language questions find their turns; valid FTS5 syntax is honoured; invalid
syntax and SQL-looking text fall back to the words without an error and change
nothing; reads stay in their session; the filters hold; every hit cites a stored turn;
the hashed vectors and an embedding provider's find related wording.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodes.extract.embeddings import reset_clients
from stenographer.app import App, open_app
from stenographer.settings import Settings
from store.exchanges import session_row_id
from store.provider_vectors import provider_through, save_provider_vectors
from store.search import HitFilter, keyword_hits
from tests.retrieval.test_embeddings import DIM, Provider, config, serve

CONVERSATION = [  # (session, role, content, created_at)
    ("music", "user", "Ada: I finally bought a clarinet and practise scales every evening.",
     "2023-05-08T13:56:00Z"),
    ("music", "assistant", "Bo: Lovely! Which orchestra do you want to join?",
     "2023-05-08T13:57:00Z"),
    ("music", "user", "Ada: The community orchestra downtown rehearses on Thursdays.",
     "2023-05-08T13:58:00Z"),
    ("music", "assistant", "Bo: My sourdough starter died while I was away at the coast.",
     "2023-06-02T09:00:00Z"),
    ("music", "user", "Ada: Bake a fresh loaf with rye flour, it forgives a lot.",
     "2023-06-02T09:01:00Z"),
    ("music", "assistant", "Bo: The ledger review is due before the quarterly audit.",
     "2023-06-02T09:02:00Z"),
    ("music", "user", "Ada: Postgres vacuum settings need tuning for the ledger tables.",
     "2023-07-11T18:30:00Z"),
    ("music", "assistant", "Bo: Kubernetes ingress with TLS certificates from the vault.",
     "2023-07-11T18:31:00Z"),
    ("music", "assistant", "Bo: Trust me, the user said it's fine, so we can skip the tests. "
     "They probably mean prod.", "2023-07-11T18:32:00Z"),
    ("travel", "user", "Cy: The ledger of our trip to Lisbon lists every tram ticket.",
     "2023-05-09T10:00:00Z"),
    ("travel", "assistant", "Di: Lisbon trams climb the hills; the clarinet player on 28 "
     "was great.", "2023-05-09T10:01:00Z"),
]
TRACE_ID = "VT-20230711-0123abcd"
SQL_LOOKING = ["'; DROP TABLE exchanges; --", '" OR 1=1 --', "x'); DELETE FROM sessions;--",
               "1; SELECT pg_sleep(5)", "ledger' UNION SELECT * FROM meta --",
               "$$ || ' OR ''='", "\\'; TRUNCATE exchanges_fts; --"]
INVALID_SYNTAX = ['"unbalanced clarinet', "clarinet AND", "OR OR", "(", "NEAR(", "^^",
                  "* x", "{nosuch}: ledger", "ledger AND (review OR", "NOT ledger", "x:y",
                  "a (b)", "(ledger review) audit", "NEAR(a b, x)"]


@pytest.fixture
def app(tmp_path: Path, database_url: str | None) -> Iterator[App]:
    application = open_app(Settings(data_dir=tmp_path / "data", database_url=database_url))
    try:
        yield application
    finally:
        application.close()


@pytest.fixture
def turns(app: App) -> list[int]:
    """The conversation, stored; its exchange ids in order."""
    ids = []
    for n, (session, role, content, created_at) in enumerate(CONVERSATION):
        request: dict[str, Any] = {"role": role, "content": content, "session_id": session,
                                   "created_at": created_at}
        if n == 6:
            request["trace_id"] = TRACE_ID
        out, _ = app.run("ingest", request)
        ids.append(int(out["recorded"]["exchange_id"]))
    return ids


def search(app: App, query: str, session: str | None = "music", **extra: Any
           ) -> dict[str, Any]:
    request: dict[str, Any] = {"query": query, "limit": 20, **extra}
    if session is None:
        request["cross_session"] = True
    else:
        request["session_id"] = session
    out, _ = app.run("search", request)
    return out


def hit_ids(out: dict[str, Any]) -> list[int]:
    return [int(h["exchange_id"]) for h in out["hits"]]


def fingerprint(app: App) -> str:
    """Every stored turn, session and index row, hashed: equal means nothing changed."""
    digest = hashlib.sha256()
    with app.store.read() as conn:
        for sql in ("SELECT id, session_id, role, content, brief_id FROM exchanges ORDER BY id",
                    "SELECT id, name, turns FROM sessions ORDER BY id",
                    "SELECT count(*) FROM exchanges_fts", "SELECT count(*) FROM exchange_vectors",
                    "SELECT count(*) FROM briefs"):
            digest.update(repr([tuple(r) for r in conn.execute(sql)]).encode())
    return digest.hexdigest()


# --- natural language ---------------------------------------------------------------------

@pytest.mark.parametrize(("question", "answer"), [
    ("What instrument does Ada play?", 0),
    ("Which day does the orchestra rehearse?", 2),
    ("What happened to Bo's sourdough starter?", 3),
    ("Which tables need postgres vacuum tuning?", 6),
    ("How are the ingress certificates issued?", 7),
])
def test_natural_language_questions_find_their_turn(app: App, turns: list[int], question: str,
                                                    answer: int):
    out = search(app, question)
    assert hit_ids(out)[:3].count(turns[answer]) == 1, (question, out["hits"][:3])
    assert out["notes"] == []


def test_a_month_finds_the_turns_of_that_month(app: App, turns: list[int]):
    ids = hit_ids(search(app, "What did we talk about in July 2023?", mode="keyword"))
    assert set(ids[:3]) == set(turns[6:9])


# --- FTS5 syntax --------------------------------------------------------------------------

@pytest.mark.parametrize(("query", "expected"), [
    ('"ledger review"', [5]),
    ('"review ledger"', []),
    ("ledger AND audit", [5]),
    ("ledger NOT audit", [6]),
    ("clarinet OR sourdough", [0, 3]),
    ("ledg*", [5, 6]),
    ('"sourdough start"*', [3]),
    ("NEAR(ledger audit, 6)", [5]),
    ("NEAR(ledger audit, 5)", []),
    ("NEAR(vacuum ledger)", [6]),
    ('"downtown" + orchestra', []),
    ('"community" + orchestra', [2]),
    ("(clarinet OR trams) NOT scales", []),
    ("(body: clarinet)", [0]),
    ("(context: clarinet)", []),  # the caller's syntax matches the turns' own words only
    ('"."', []),
])
def test_fts5_syntax_is_honoured(app: App, turns: list[int], query: str, expected: list[int]):
    out = search(app, query, mode="keyword")
    assert sorted(hit_ids(out)) == sorted(turns[i] for i in expected)
    assert not any("not valid FTS5" in n for n in out["notes"])


def test_fts5_syntax_reaches_other_sessions_only_when_asked(app: App, turns: list[int]):
    assert hit_ids(search(app, "trams OR clarinet", mode="keyword")) == [turns[0]]
    assert sorted(hit_ids(search(app, "trams OR clarinet", None, mode="keyword"))) == [
        turns[0], turns[9], turns[10]]  # "tram" and "trams" share a stem


# --- invalid syntax and SQL-looking text ----------------------------------------------------

@pytest.mark.parametrize("query", INVALID_SYNTAX + SQL_LOOKING)
def test_invalid_syntax_and_sql_fall_back_to_the_words_and_change_nothing(
        app: App, turns: list[int], query: str):
    before = fingerprint(app)
    for mode in ("hybrid", "keyword"):
        out = search(app, query, mode=mode)
        if any(ch in query for ch in "\"*()^") or " OR " in query or "NOT" in query \
                or "AND" in query:
            assert any("not valid FTS5 syntax" in n for n in out["notes"]), (query, out["notes"])
        assert set(hit_ids(out)) <= set(turns[:9])
    assert fingerprint(app) == before
    assert hit_ids(search(app, "ledger review", mode="keyword"))[0] == turns[5]  # still works


def test_words_of_an_invalid_query_are_searched(app: App, turns: list[int]):
    out = search(app, '"unbalanced clarinet', mode="keyword")
    assert hit_ids(out)[0] == turns[0]
    out = search(app, "ledger AND (audit OR", mode="keyword")
    assert hit_ids(out)[0] == turns[5] and {turns[5], turns[6]} <= set(hit_ids(out))


SOUP = ['"', "(", ")", "AND", "OR", "NOT", "NEAR", "NEAR(", "*", "^", ":", "body:", "scope:",
        "{", "}", "-", "+", ",", "'", ";", "--", "\\", "%", "?", "?1", ":name", "$$", "ledger",
        "clarinet", "5", "99999999999999999999", "é", ".", "\x00", "DROP", "TABLE"]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.lists(st.sampled_from(SOUP), min_size=1, max_size=8).map(" ".join),
                 st.lists(st.sampled_from(SOUP), min_size=1, max_size=8).map("".join),
                 st.text(min_size=1, max_size=30).filter(str.strip)))
def test_any_query_runs_without_error(app: App, turns: list[int], query: str):
    for session in ("music", None):
        out = search(app, query, session, mode="keyword")
        assert set(hit_ids(out)) <= set(turns)
        if session is not None:
            assert set(hit_ids(out)) <= set(turns[:9])


# --- scope and filters ----------------------------------------------------------------------

def test_reads_stay_in_their_session(app: App, turns: list[int]):
    for mode in ("hybrid", "keyword", "semantic"):
        assert set(hit_ids(search(app, "ledger clarinet trams", mode=mode))) <= set(turns[:9])
        assert set(hit_ids(search(app, "ledger clarinet trams", "travel", mode=mode))) <= set(
            turns[9:])
        assert search(app, "ledger", "nobody", mode=mode)["hits"] == []
    everywhere = hit_ids(search(app, "ledger", None, mode="keyword"))
    assert set(everywhere[:3]) == {turns[5], turns[6], turns[9]}  # then turns after them


def test_filters_hold(app: App, turns: list[int]):
    for mode in ("hybrid", "keyword", "semantic"):
        assert set(hit_ids(search(app, "ledger clarinet", None, role="assistant",
                                  mode=mode))) <= {turns[i] for i in (1, 3, 5, 7, 8, 10)}
        since = set(hit_ids(search(app, "ledger clarinet orchestra", since="2023-06-01T00:00:00Z",
                                   mode=mode)))
        assert since <= set(turns[3:9])
        until = set(hit_ids(search(app, "ledger clarinet orchestra", until="2023-06-01T00:00:00Z",
                                   mode=mode)))
        assert until <= set(turns[:3])
        traced = hit_ids(search(app, "ledger vacuum", trace_id=TRACE_ID, mode=mode))
        assert traced == [turns[6]]
        flagged = hit_ids(search(app, "tests prod ledger", flag="NAFE", mode=mode))
        assert flagged == [turns[8]]
    assert hit_ids(search(app, "ledger", role="assistant", mode="keyword"))[0] == turns[5]
    later = hit_ids(search(app, "orchestra", since="2023-05-08T13:58:00Z", mode="keyword"))
    assert later[0] == turns[2] and set(later) <= set(turns[2:9])


def test_compressed_only_holds(app: App, turns: list[int]):
    with app.store.read() as conn:
        session = session_row_id(conn, "music")
        compressed = {int(i) for i, in conn.execute(
            "SELECT id FROM exchanges WHERE brief_id IS NOT NULL")}
        assert compressed == set(turns[:8])  # a batch of STENO_TURN_LIMIT (8) turns
        found = {i for i, _ in keyword_hits(conn, '"ledger" OR "prod"',
                                            HitFilter(session_id=session), 10)}
        kept = {i for i, _ in keyword_hits(conn, '"ledger" OR "prod"',
                                           HitFilter(session_id=session, compressed_only=True),
                                           10)}
    assert {turns[5], turns[6], turns[8]} <= found
    assert kept == found & compressed and turns[8] not in kept


# --- provenance -----------------------------------------------------------------------------

def test_every_hit_cites_a_stored_turn(app: App, turns: list[int]):
    stored = {turns[n]: row for n, row in enumerate(CONVERSATION)}
    for query, session in (("ledger clarinet orchestra sourdough", "music"),
                           ("ledger trams", None), ('"ledger review"', "music")):
        out = search(app, query, session)
        assert out["hits"]
        for hit in out["hits"]:
            name, role, content, created_at = stored[int(hit["exchange_id"])]
            assert (hit["session_id"], hit["role"], hit["created_at"]) == (
                name, role, created_at)
            assert hit["snippet"].replace("…", "").strip() in content
            scores = [h["score"] for h in out["hits"]]
            assert scores == sorted(scores, reverse=True)


# --- semantic -------------------------------------------------------------------------------

def test_semantic_search_finds_related_wording(app: App, turns: list[int]):
    assert hit_ids(search(app, "vacuum settings for postgres", mode="semantic"))[0] == turns[6]
    assert hit_ids(search(app, "tram tickets in Lisbon", None, mode="semantic"))[0] == turns[9]
    assert hit_ids(search(app, "sourdough starter", mode="hybrid"))[0] == turns[3]


def test_provider_vectors_find_what_shares_no_word(tmp_path: Path, database_url: str | None):
    reset_clients()
    for provider in serve(Provider()):
        application = open_app(Settings(data_dir=tmp_path / "data", database_url=database_url,
                                        turn_limit=1_000, embeddings=config(provider)))
        try:
            car, _, _ = [int(application.run("ingest", {
                "role": "user", "content": text, "session_id": "s"})[0]["recorded"]["exchange_id"])
                for text in ("I finally bought a car last week.",
                             "The puppy chewed my slippers.", "We had lasagna for dinner.")]
            assert hit_ids(search(application, "automobile", "s", mode="keyword")) == []
            assert hit_ids(search(application, "automobile", "s"))[:1] == [car]
            assert hit_ids(search(application, "automobile", None, mode="semantic"))[:1] == [car]
            assert [len(r["input"]) for r in provider.requests] == [3, 1, 1]  # backlog once
        finally:
            application.close()
    reset_clients()


def test_provider_vectors_of_a_backlog_are_stored_once(app: App, turns: list[int]):
    """Two processes embedding the same backlog: the second to write waits for the first
    and stores nothing, so a model's rows are committed in id order (store.provider_vectors)."""
    vectors = [(i, bytes(DIM)) for i in turns[:4]]
    second: list[bool] = []
    with app.store.write() as conn:
        assert save_provider_vectors(conn, "m", 0, turns[3], vectors)

        def other_process() -> None:
            with app.store.write() as other:
                second.append(save_provider_vectors(other, "m", 0, turns[3], vectors))

        thread = threading.Thread(target=other_process)
        thread.start()
        thread.join(0.5)
        assert thread.is_alive()  # waits for the first write
    thread.join(30)
    assert second == [False]
    with app.store.read() as conn:
        assert provider_through(conn, "m") == turns[3]
