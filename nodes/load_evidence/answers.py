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

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from nodes.load_evidence.hits import hit_filter
from store.neighbours import answers_to
from store.search import ids_matching

__all__ = ["ANSWER_SHARE", "ASKING_TURNS", "answered_hits"]

ANSWER_SHARE = 0.2
ASKING_TURNS = 50  # the best-ranked turns whose answers are looked up


def answered_hits(state: State, cfg: Mapping[str, Any]) -> Writes:
    ranked = state.get("ranked") or []
    top = ranked[:ASKING_TURNS]
    fts = state.get("fts")
    if not top or (fts is not None and fts.get("caller")):
        return {"ranked": ranked}  # FTS5 syntax asks for the turns that match, no others
    with state.ctx.store.read() as conn:
        answers = answers_to(conn, [i for i, _ in top])
        allowed = ids_matching(conn, list(answers.values()), hit_filter(state.get("query"), cfg),
                               in_session=True)  # an answer is in its question's session
    if not allowed:
        return {"ranked": ranked}
    scores = {int(i): float(s) for i, s in ranked}
    for question, score in top:
        answer = answers.get(int(question))
        if answer in allowed:
            scores[answer] = scores.get(answer, 0.0) + ANSWER_SHARE * float(score)
    best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return {"ranked": [[i, round(s, 8)] for i, s in best]}
