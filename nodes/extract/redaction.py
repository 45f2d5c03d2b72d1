"""Free text as it will be stored: with its secrets redacted (``STENO_REDACT_SECRETS``,
on by default; ``off`` stores text as sent).

:func:`redacted_text` is the one place that decides; every write of free text that a
user or an agent sends goes through it:

* a turn's content, and the milestone label that comes with a CLAEG shutdown turn
  (:func:`redacted_turn`, right after validation, before anything reads the content
  for storing, indexing or hashing: the keyword index, the vector, the extracted
  sentences, the stored text and its hash all see ``[REDACTED:<kind>]``);
* a milestone label (:func:`redacted_milestone`, before the label is stored);
* the reason a forget request gives (nodes.publish.forgotten, before the tombstone
  is written).

Identifiers are not free text: session ids, trace ids and source keys are validated
names that other turns and tools refer to, and change nothing here.
"""

from __future__ import annotations

import hashlib
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.extract.secrets import Redacted, redact

__all__ = ["redacted_milestone", "redacted_text", "redacted_turn"]


def redacted_text(ctx: RunContext, text: str) -> Redacted:
    """``text`` as it is stored: its secrets (and ``STENO_SECRET_PATTERNS``) replaced
    by ``[REDACTED:<kind>]``, or as sent when redaction is off."""
    if not ctx.settings.redact_secrets:
        return Redacted(text, ())
    return redact(text, ctx.secret_patterns)


class RedactedTurnWrites(TypedDict):
    turn: Any
    redacted: Any


@node
def redacted_turn(turn: Any, *, run: RunContext) -> RedactedTurnWrites:
    turn = dict(turn)
    content = redacted_text(run, turn["content"])
    turn["content"] = content.text
    kinds = list(content.kinds)
    if turn.get("milestone"):
        label = redacted_text(run, turn["milestone"])
        turn["milestone"] = label.text
        kinds += label.kinds
    turn["content_hash"] = hashlib.sha256(turn["content"].encode("utf-8")).hexdigest()
    return {"turn": turn, "redacted": kinds}


class RedactedMilestoneWrites(TypedDict):
    milestone: Any


@node
def redacted_milestone(milestone: Any, *, run: RunContext) -> RedactedMilestoneWrites:
    milestone = dict(milestone)
    label = redacted_text(run, milestone["label"])
    milestone["label"] = label.text
    return {"milestone": milestone}
