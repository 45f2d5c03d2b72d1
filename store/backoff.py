"""The project's one back-off: how long to wait before retry ``attempt`` (1, 2, …).

It lives at the bottom layer because the bus's ingest-path skip (store.bus) uses it as
well as the scheduler (stenographer.scheduler); the engine's retry policy on the nodes
that talk to a peer is given the same schedule (stenographer.app).
"""

from __future__ import annotations

import random

__all__ = ["backoff"]


def backoff(attempt: int, *, first_s: float, cap_s: float, jitter: float = 0.0) -> float:
    """``first_s`` doubled per attempt up to ``cap_s``, spread by ± ``jitter`` (a
    fraction) so that several senders do not retry in step."""
    base = min(cap_s, first_s * 2.0 ** (attempt - 1))
    return base * (1.0 + jitter * (2.0 * random.random() - 1.0)) if jitter else base
