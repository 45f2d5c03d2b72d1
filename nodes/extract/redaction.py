"""Node: the turn as it will be stored, with its secrets redacted, and its content hash.

It runs right after validation, before anything reads the content for storing,
indexing or hashing (issue #5 item 4): the keyword index, the vector, the extracted
sentences, the stored text and its hash all see ``[REDACTED:<kind>]`` instead of the
secret. ``STENO_REDACT_SECRETS=off`` stores turns as sent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from nodes.extract.secrets import redact

__all__ = ["redacted_turn"]


def redacted_turn(state: State, cfg: Mapping[str, Any]) -> Writes:
    turn = dict(state.get("turn"))
    kinds: tuple[str, ...] = ()
    if state.ctx.settings.redact_secrets:
        result = redact(turn["content"], state.ctx.secret_patterns)
        turn["content"], kinds = result.text, result.kinds
    turn["content_hash"] = hashlib.sha256(turn["content"].encode("utf-8")).hexdigest()
    return {"turn": turn, "redacted": list(kinds)}
