"""The ranking's parts: the keyword index's context and date columns, the length prior,
the hashed vectors, score fusion, answers lent a question's score, and the guard's
brief ranking."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import store.sqlite.search
from nodes.extract.fusion import fused, rounded
from nodes.extract.terms import CONTEXT_TERMS, context_terms
from nodes.extract.vectors import quantize, text_vector
from nodes.load_evidence.answers import _with_lent
from nodes.load_evidence.session_view import _settled
from stenographer.app import App, open_app
from stenographer.settings import DEFAULT_VECTOR_DIM, Settings
from store.neighbours import answers_to
from store.search_filter import dated_terms
from tests.retrieval.conftest import ids, ingest, search


def test_context_terms_are_the_new_content_words_of_the_turns_before():
    text = "We loved it, the kids too!"
    previous = ["How was the camping trip to the lake? The kids?", "We went camping. Camping!"]
    assert context_terms(text, previous).split() == ["camping", "trip", "lake", "went"]
    many = [" ".join(f"word{i}" for i in range(100))]
    assert len(context_terms("x", many).split()) == CONTEXT_TERMS
    assert context_terms("anything", []) == ""


def test_dated_terms_are_the_utc_month_and_year():
    assert dated_terms(0.0) == "January 1970"
    assert dated_terms(1_683_554_160.0) == "May 2023"  # 2023-05-08T13:56:00Z


def test_an_answer_is_found_by_the_words_of_its_question_below_turns_using_them(app: App):
    question = ingest(app, "s", "How did the marathon training go last month?")
    answer = ingest(app, "s", "Really well: I finished in under four hours.")
    unrelated = ingest(app, "s", "Lunch was fine.")
    uses = ingest(app, "s", "My marathon training plan has intervals twice a week.")
    ranked = ids(search(app, "marathon training", mode="keyword"))
    assert ranked.index(answer) > max(ranked.index(question), ranked.index(uses))
    assert unrelated not in ranked[:3]


def test_a_month_in_the_query_matches_the_turns_dated_in_it(app: App):
    march = ingest(app, "s", "Moved the staging cluster to the new region.",
                   created_at="2025-03-14T10:00:00Z")
    ingest(app, "s", "Moved the billing jobs to the new region.",
           created_at="2025-06-02T10:00:00Z")
    result = search(app, "what did we move in March?", mode="keyword")
    assert ids(result)[:1] == [march]
    assert result["hits"][0]["created_at"] == "2025-03-14T10:00:00Z"


def test_the_length_prior_softens_bm25s_preference_for_short_turns(
        app: App, monkeypatch: pytest.MonkeyPatch):
    short_text = "Pottery, yes."
    long_text = ("I signed up for a pottery class on Saturdays; we make bowls and cups, and "
                 "the teacher fires them in the kiln the week after.")
    short, long = ingest(app, "s", short_text), ingest(app, "s", long_text)

    def ratio() -> float:
        scores = {h["exchange_id"]: h["score"] for h in
                  search(app, "pottery", mode="keyword")["hits"]}
        return float(scores[long] / scores[short])

    with_prior = ratio()
    monkeypatch.setattr(store.sqlite.search, "LENGTH_PRIOR", 0.0)
    plain = ratio()
    expected = (len(long_text) / len(short_text)) ** 0.2
    assert with_prior / plain == pytest.approx(expected, rel=1e-3)
    assert plain < with_prior < 1.0  # softened, not reversed


def test_hashed_vectors_are_deterministic_unit_and_borrow_from_the_turns_before():
    dim = DEFAULT_VECTOR_DIM
    a = text_vector("The deploy pipeline failed on staging.", dim)
    assert a.shape == (dim,) and a.dtype == np.float32
    assert np.isclose(np.linalg.norm(a), 1.0)
    assert np.array_equal(a, text_vector("The deploy pipeline failed on staging.", dim))
    assert not text_vector("the and of", dim).any()  # stop words only
    bare = text_vector("Yes, twice.", dim)
    topic = text_vector("Did the kubernetes upgrade finish?", dim)
    lent = text_vector("Yes, twice.", dim, ["Did the kubernetes upgrade finish?"])
    assert float(lent @ topic) > float(bare @ topic) + 0.3
    packed = np.frombuffer(quantize(a), dtype=np.int8)
    assert len(packed) == dim and np.abs(packed).max() <= 127


def test_fusion_scales_each_list_and_breaks_ties_by_older_id():
    keyword = [[7, 10.0], [3, 5.0], [9, 5.0]]
    semantic = [[3, 0.5], [11, 0.9]]
    ranked = fused(keyword, semantic, vector_weight=0.3)
    scores = dict((i, s) for i, s in ranked)
    assert scores[7] == 1.0 and scores[3] == pytest.approx(0.5 + 0.15)
    assert scores[11] == pytest.approx(0.27)
    assert [i for i, _ in ranked] == [7, 3, 9, 11]
    provider = [[11, 0.80], [9, 0.60], [3, 0.40]]  # scaled to 1.0 .. 0.0 within the list
    with_provider = dict((i, s) for i, s in fused(keyword, semantic, provider,
                                                  provider_weight=1.0))
    assert with_provider[11] == pytest.approx(0.27 + 1.0)
    assert with_provider[9] == pytest.approx(0.5 + 0.5)
    assert fused([], []) == []


def test_rounded_lists_are_round_bit_for_bit(monkeypatch: pytest.MonkeyPatch):
    # what the fused and vector lists hold: scores of all sizes, float32 cosines, and
    # values whose decimal rounding is a tie or nearly one (where a product in doubles
    # alone would round the wrong way), plus zeros, negatives, huge and non-finite ones
    rng = np.random.default_rng(3)

    def halves(digits: int) -> list[float]:  # decimal ties, and the doubles beside them
        ties = (rng.integers(0, 10**9, 3_000) + 0.5) / 10.0**digits
        return [*ties.tolist(), *np.nextafter(ties, np.inf).tolist(),
                *np.nextafter(ties, -np.inf).tolist()]

    many = rng.random(20_000) * rng.choice([1e-9, 1e-3, 0.3, 1.0, 40.0], 20_000)
    values = [*many.tolist(), *many.astype(np.float32).tolist(), 0.0, -0.0, -0.125,
              -3e-9, 2.5e-8, 1.5e-6, 0.123456785, 0.1234565, 1e30, float("inf"),
              float("-inf"), float("nan"), *(rng.random(2_000) * 1e9).tolist(),
              *halves(8), *halves(6)]

    def bits(xs: list[float]) -> list[str]:
        return [x.hex() for x in xs]  # -0.0 and 0.0 apart; every NaN the same

    for digits in (6, 8):
        assert bits(rounded(values, digits)) == bits([round(v, digits) for v in values])
        assert bits(rounded(values[:5], digits)) == bits([round(v, digits)
                                                          for v in values[:5]])
    monkeypatch.delitem(sys.modules, "numpy")  # not loaded: rounded one by one
    assert bits(rounded(values, 8)) == bits([round(v, 8) for v in values])


def test_a_question_lends_part_of_its_score_to_the_turn_that_answers_it(app: App):
    asked = ingest(app, "s", "Which violin teacher do you recommend for beginners?")
    answer = ingest(app, "s", "Mrs. Okafor, without a doubt.")  # no word of the query
    ingest(app, "s", "Unrelated: the printer is out of toner.")
    ranked = search(app, "violin teacher for beginners")
    assert ids(ranked)[:2] == [asked, answer]


# (text, asks): a turn asks when its last character that is not a space, tab or line
# break is a question mark, ASCII or full-width, however long the text or its tail
ASKING = [
    ("Where is it?", True),
    ("Where is it? \t\r\n", True),
    ("Where is it?" + " " * 63, True),
    ("Where is it?" + "\n" * 200, True),
    ("どこですか？", True),
    ("どこですか？" + " " * 62, True),
    ("é" * 400 + "?", True),
    ("?", True),
    ("Is it? No.", False),
    ("Where is it?!", False),
    ("Where is it?\u00a0", False),  # a no-break space is not trimmed
    ("どこですか。", False),
    ("¿", False),
    ("？x", False),
    ("…" * 100, False),
]


def test_the_turns_that_ask_are_the_same_on_both_backends(
        tmp_path: Path, database_url: str | None):
    app = open_app(Settings(data_dir=tmp_path, turn_limit=1_000, database_url=database_url))
    try:
        asked = [ingest(app, "s", text) for text, _ in ASKING]
        last = ingest(app, "s", "the turn after the last one")
        with app.store.read() as conn:
            answers = answers_to(conn, [*asked, last])
        expected = {turn: turn + 1 for turn, (_, asks) in zip(asked, ASKING, strict=True)
                    if asks}
        assert answers == expected
    finally:
        app.close()


def test_lent_scores_reorder_the_hits_as_a_full_sort_would():
    # fusion orders equal rounded scores by their unrounded values: the result is by
    # score, then older id, like a sort of the whole list
    ranked = [[5, 0.9], [3, 0.5], [2, 0.5], [8, 0.4], [1, 0.3]]
    lent = [(8, 0.18), (9, 0.1), (9, 0.06)]  # 8: 0.58; 9 is new: 0.16
    assert _with_lent(ranked, lent) == [[5, 0.9], [8, 0.58], [2, 0.5], [3, 0.5], [1, 0.3],
                                        [9, 0.16]]


def test_the_guard_reads_hits_for_briefs_until_the_top_k_is_settled():
    assert _settled([0.9, 0.8, 0.1], 2, unread=0.5)
    assert not _settled([0.9, 0.8, 0.1], 2, unread=0.8)  # a later hit could tie the second
    assert not _settled([0.9, 0.8, 0.8], 2, unread=0.0)  # a tie at the cut needs the sums
    assert not _settled([0.9, 0.9, 0.1], 2, unread=0.0)  # so does a tie inside the top-K
    assert not _settled([0.9], 2, unread=0.0)  # fewer than K briefs so far


def test_the_guard_ranks_briefs_by_their_best_turn(tmp_path):
    app = open_app(Settings(data_dir=tmp_path / "data", turn_limit=4))
    try:
        strong = [ingest(app, "g", text) for text in (
            "The flamingo migration study concluded with a flamingo census.",
            "Weather was mild.", "Coffee machine fixed.", "Lunch at noon.")]
        weak = [ingest(app, "g", text) for text in (
            "A flamingo sticker on the laptop.", "Someone mentioned a flamingo mug.",
            "The flamingo emoji again.", "Another flamingo joke.")]
        out, _ = app.run("guard", {"session_id": "g", "query": "flamingo census study"})
        briefs = out["briefs"]
        assert [b["source_ids"] for b in briefs[:2]] == [strong, weak]
    finally:
        app.close()


def test_a_searching_process_holds_the_vectors_it_ingests_as_a_refresh_would_read_them(
        app: App, monkeypatch: pytest.MonkeyPatch):
    """A process whose vector copy is loaded (it searched) adds each turn it ingests to
    the copy from the vector it wrote, so the next search reads none of them back. A turn
    written by another process in between leaves the next one of its own to the refresh,
    which reads both: the copy always equals one read from the store."""
    import store.vectors
    from store.vectors import VectorCache

    first = ingest(app, "s", "postgres vacuum settings")
    assert ids(search(app, "vacuum", mode="semantic")) == [first]  # the copy is loaded
    read: list[int] = []
    rows_after = VectorCache.rows_after

    def counted(self: VectorCache, conn: Any, last: int) -> Any:
        rows = rows_after(self, conn, last)
        read.extend(int(r[0]) for r in rows)
        return rows

    monkeypatch.setattr(VectorCache, "rows_after", counted)
    topics = ("react hooks", "kubernetes ingress", "postgres autovacuum", "tls renewal")
    held = [ingest(app, f"s{n % 2}", f"turn {n} about {topics[n % 4]}") for n in range(20)]
    top = ids(search(app, "postgres autovacuum", session="s0", mode="semantic"))[0]
    assert top in {held[n] for n in range(2, 20, 4)}
    assert read == []

    def same_as_stored() -> None:
        copy, fresh = app.store.vectors, VectorCache(app.settings.vector_dim)
        with app.store.read() as conn:
            fresh.refresh(conn)
        n = copy._n
        assert n == fresh._n
        assert copy._ids[:n].tolist() == fresh._ids[:n].tolist()
        assert copy._sessions[:n].tolist() == fresh._sessions[:n].tolist()
        assert (copy._cols[:, :n] == fresh._cols[:, :n]).all()

    same_as_stored()
    monkeypatch.setattr(store.vectors, "_HELD", 5)  # a bounded list: the rest read back
    more = [ingest(app, "s0", f"turn {n} about {topics[n % 4]}") for n in range(20, 28)]
    assert ids(search(app, "react hooks", session="s0", mode="semantic"))
    assert read == more[5:]
    same_as_stored()
    read.clear()
    other = open_app(Settings(data_dir=app.settings.data_dir, turn_limit=1_000))
    try:
        theirs = ingest(other, "s1", "turn from another process about tls renewal")
    finally:
        other.close()
    mine = ingest(app, "s1", "turn 29 about tls renewal")
    assert {theirs, mine} <= set(ids(search(app, "tls renewal", session="s1", mode="semantic")))
    assert read == [theirs, mine]
    same_as_stored()
