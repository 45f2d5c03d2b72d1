"""Node: a turn that asks what the query asks lends part of its score to its answer.

In a conversation the words of a question are in the question ("What instruments do
you play?"), its answer holds the fact ("Yeah, I play clarinet!"). The keyword index
already lends the answer its question's words (the context column); here the
question's final score, after fusion, is shared too: the next turn of the session
after a top-ranked turn that ends with a question mark gains ANSWER_SHARE of its score
(and enters the list if it was not in it). Not for a query in FTS5 syntax, which asks
for exactly the turns that match it. Measured on LoCoMo-format conversations:
+1.5 points of recall@5 and +3 of MRR, the same on both conversations of the dev split.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import itemgetter
from typing import Any, TypedDict

from nodes.context import Cfg, RunContext, node
from nodes.load_evidence.hits import hit_filter
from store.neighbours import answers_to
from store.search import ids_matching

__all__ = ["ANSWER_SHARE", "ASKING_TURNS", "answered_hits"]

ANSWER_SHARE = 0.2
ASKING_TURNS = 50  # the best-ranked turns whose answers are looked up


class AnsweredHitsWrites(TypedDict):
    ranked: Any


@node
def answered_hits(ranked: Any, fts: Any, query: Any, *, run: RunContext,
                  cfg: Cfg) -> AnsweredHitsWrites:
    ranked = ranked or []
    top = ranked[:ASKING_TURNS]
    if not top or (fts is not None and fts.get("caller")):
        return {"ranked": ranked}  # FTS5 syntax asks for the turns that match, no others
    with run.store.read() as conn:
        answers = answers_to(conn, [i for i, _ in top])
        allowed = ids_matching(conn, list(answers.values()), hit_filter(query, cfg),
                               in_session=True)  # an answer is in its question's session
    if not allowed:
        return {"ranked": ranked}
    lent = [(answer, ANSWER_SHARE * float(score)) for question, score in top
            if (answer := answers.get(int(question))) in allowed]
    return {"ranked": _with_lent(ranked, lent)}


def _by_rank(hit: list[Any]) -> tuple[float, int]:
    return -hit[1], hit[0]


_ID, _SCORE = itemgetter(0), itemgetter(1)


def _with_lent(ranked: list[list[Any]], lent: list[tuple[int, float]]) -> list[list[Any]]:
    """``ranked`` with the scores lent to answers added (in the questions' order), best
    first, ties: older id first. The hits that gained nothing are sorted by two C-keyed
    stable sorts (they are nearly in order already), the few answers placed among them
    by bisection."""
    kept: list[list[Any]] = []
    scores = dict.fromkeys((answer for answer, _ in lent), 0.0)
    for hit in ranked:
        if hit[0] in scores:
            scores[hit[0]] = float(hit[1])
        else:
            kept.append(hit)
    for answer, share in lent:
        scores[answer] += share
    kept.sort(key=_ID)
    kept.sort(key=_SCORE, reverse=True)  # stable: equal scores stay in id order
    moved = sorted((-score, i) for i, score in scores.items())
    out: list[list[Any]] = []
    lo = 0
    for neg, exchange_id in moved:
        at = bisect_left(kept, (neg, exchange_id), lo=lo, key=_by_rank)
        out += kept[lo:at]
        out.append([exchange_id, round(-neg, 8)])
        lo = at
    out += kept[lo:]
    return out
