"""Small files for this user only, replaced whole: written aside under another name,
owner-only (0600) from their creation, then renamed into place, so that a reader never
sees half of one and no other user ever reads one (store.hook_log's record of the
hooks, store.postgres.kept's record of the stores)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["replace_json"]


def replace_json(path: Path, value: object, **dump: Any) -> None:
    """Replace ``path`` with ``value`` as JSON (``dump``: ``json.dump``'s options).
    Raises OSError, leaving nothing aside."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        fd = os.open(temporary, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f, **dump)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
