"""A peer's base URL (shared by the settings and the sync request checks)."""

from __future__ import annotations

import re

__all__ = ["PEER_URL_FORM", "peer_url"]

_PEER_URL = re.compile(r"https?://[^\s/?#]+(?:/[^\s?#]*)?", re.IGNORECASE)
PEER_URL_FORM = "http(s)://host:port, e.g. http://127.0.0.1:8765"


def peer_url(raw: str) -> str | None:
    """A peer's base URL without a trailing slash, or None when it is not one."""
    url = raw.strip().rstrip("/")
    return url if _PEER_URL.fullmatch(url) else None
