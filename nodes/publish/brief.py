"""Node: claim the batch's turns for a new brief, atomically; note whether to go again.

Also the one way a stored brief is made again from its source turns (``rebuilt_brief``):
when a milestone is marked on one of them, or some of them were forgotten.
"""

from __future__ import annotations

import time
from typing import Any, NotRequired, TypedDict

from nodes.batch import each_split
from nodes.context import RunContext, node
from nodes.extract.brief import brief_text
from nodes.load_evidence.compression import batch_records
from store.briefs import BriefDraft, ClaimLost, claim_briefs
from store.exchanges import count_live, live_turns
from store.forget import brief_sources_of, delete_brief, rewrite_brief
from store.milestones import milestone_ids
from store.sql import Conn

__all__ = ["MAX_ROUNDS", "claimed_brief", "compressed_sessions", "rebuilt_brief"]

MAX_ROUNDS = 64  # one compression run never loops longer than this
READ_PAGE = 2_000  # uncompressed turns of a session read (and claimed) at once, at most


def rebuilt_brief(conn: Conn, brief_id: int) -> str | None:
    """Write a brief's tier and text again from its stored source turns and their
    current milestone labels, as compression would make it now; None when no source
    turn is left (the brief is deleted). Call inside a write."""
    turns = brief_sources_of(conn, brief_id)
    if not turns:
        delete_brief(conn, brief_id)
        return None
    tier, body = brief_text(batch_records(turns, milestone_ids(conn, [t.id for t in turns])))
    rewrite_brief(conn, brief_id, tier, body, [t.id for t in turns])
    return tier


def _claimed(conn: Conn, session_row: int,
             batches: list[tuple[list[dict[str, Any]], dict[str, Any]]]) -> list[dict[str, Any]]:
    """Claim each batch for a brief of its draft, in order, inside the caller's write
    (ClaimLost: another writer compressed some of their turns first)."""
    now = time.time()
    ids = claim_briefs(conn, [BriefDraft(
        session_id=session_row,
        tier=draft["tier"],
        body=draft["body"],
        created_at=now,
        sources=tuple((t["id"], bytes.fromhex(t["hash"])) for t in batch),
    ) for batch, draft in batches])
    # A milestone marked since the batches were read is seen here: the claim holds
    # the turns (their rows, on PostgreSQL), and marking reads a turn's brief
    # under the same lock (store.milestones.mark_milestone).
    labels = milestone_ids(conn, [t["id"] for batch, _ in batches for t in batch])
    made = []
    for brief_id, (batch, draft) in zip(ids, batches, strict=True):
        tier = draft["tier"]
        if any(labels.get(t["id"]) != t["milestone"] for t in batch):
            tier = rebuilt_brief(conn, brief_id) or tier
        made.append({"id": brief_id, "tier": tier, "turns": len(batch),
                     "session_row": session_row})
    return made


class ClaimedBriefWrites(TypedDict):
    briefs: NotRequired[Any]
    rounds: Any
    again: Any


@node
def claimed_brief(batch: Any, draft: Any, rounds: Any, session_row: Any, *,
                  run: RunContext) -> ClaimedBriefWrites:
    batch, draft = batch, draft
    rounds = (rounds or 0) + 1
    if not batch or draft is None:
        return {"rounds": rounds, "again": False}
    limit = run.settings.turn_limit
    made: list[dict[str, Any]] = []
    try:
        with run.store.write() as conn:
            made += _claimed(conn, session_row, [(batch, draft)])
            more = count_live(conn, session_row) >= limit
    except ClaimLost:
        more = True  # someone else compressed; look again at what is left
    return {"briefs": made, "rounds": rounds, "again": more and rounds < MAX_ROUNDS}


class CompressedSessionsWrites(TypedDict):
    briefs: Any
    sessions_compressed: Any


@node
def compressed_sessions(due: Any, *, run: RunContext) -> CompressedSessionsWrites:
    """After a batch of turns (nodes.batch): each session it left holding a full batch
    of uncompressed turns (``due``) is compressed in one write, brief after brief as the
    compress graph makes them (its oldest turns, the same text and claim), until fewer
    than a batch are left. A session whose claim is lost to another writer keeps what
    is left for the next ingest or recovery. From BRIEFS_SPLIT_FROM briefs a page, the
    run's worker process writes part of their text (nodes.batch.each_split) while this
    one writes the rest."""
    limit = run.settings.turn_limit
    page = max(1, READ_PAGE // limit) * limit  # whole batches of turns read at once
    made: list[dict[str, Any]] = []
    for session_row in due or ():
        try:
            with run.store.write() as conn:
                session_made = []
                while True:
                    turns = live_turns(conn, session_row, page)
                    whole = turns[:len(turns) // limit * limit]
                    if not whole:
                        break
                    labels = milestone_ids(conn, [t.id for t in whole])
                    drafts: list[dict[str, Any]] = [
                        {"batch": batch_records(whole[start:start + limit], labels)}
                        for start in range(0, len(whole), limit)]
                    each_split(run, drafts, ("brief_draft",))
                    session_made += _claimed(conn, session_row,
                                             [(d["batch"], d["draft"]) for d in drafts])
                    if len(turns) < page:
                        break  # fewer than a batch are left
        except ClaimLost:
            continue
        made += session_made
    return {"briefs": made, "sessions_compressed": len({b["session_row"] for b in made})}
