"""What a PostgreSQL server keeps in its data directory for each store, by the store's id:
the vector copy (``vectors-<id>.bin``, store.postgres.vectors; 144 MB at 1,000,000
turns) and the derived keyword index (``keywords-<id>/``, store.postgres.keywords).

A database dropped and created again under the same name holds another store, with
another id, and nothing would ever read the old store's files again. So the directory
remembers which store it last saw at each database (``stores.json``: host, port and
name -> store id), and a server that finds another id there removes the files of the
one before. Files of stores in other databases are left alone: a data directory may
serve several databases in turn.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

from store.file_lock import held
from store.owner_file import replace_json

__all__ = ["SEEN_FILE", "STORE_ID", "forget_replaced_store", "keyword_dir", "vector_file"]

STORE_ID = "SELECT value FROM meta WHERE key = 'store_id'"
SEEN_FILE = "stores.json"
LOCK_WAIT_S = 5.0  # another server recording its database at the same moment
# An id as the schema makes it (a UUID's hex digits): nothing else names a file to remove.
_ID_FORM = re.compile(r"[0-9a-f]{32}")


def vector_file(data_dir: Path, store_id: str) -> Path:
    """The kept vector copy of ``store_id``."""
    return data_dir / f"vectors-{store_id}.bin"


def keyword_dir(data_dir: Path, store_id: str) -> Path:
    """The derived keyword index of ``store_id``."""
    return data_dir / f"keywords-{store_id}"


def _kept_files(data_dir: Path, store_id: str) -> list[Path]:
    """The files kept for ``store_id``, half-written copies (``.bin.<pid>.<thread>``)
    included."""
    copy = vector_file(data_dir, store_id)
    return [*data_dir.glob(f"{copy.name}*"), keyword_dir(data_dir, store_id)]


def _seen(path: Path) -> dict[str, Any]:
    try:
        seen = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return seen if isinstance(seen, dict) else {}


def forget_replaced_store(data_dir: Path, database: str, store_id: str) -> list[Path]:
    """Record that ``database`` holds ``store_id``; when it held another store before,
    remove that store's kept files. Returns what was removed. A data directory that
    cannot be read or written is left as it is (the files are caches).

    Servers of several databases may start at once on one data directory: the record
    is read again, changed and replaced under a lock (``stores.json.lock``), so that
    none of them loses another's entry; a server that cannot have the lock within
    ``LOCK_WAIT_S`` records nothing and removes nothing (the next one will)."""
    seen_path = data_dir / SEEN_FILE
    if _seen(seen_path).get(database) == store_id:  # the common case: nothing to write
        return []
    try:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # as the kept files make it
    except OSError:
        return []
    with held(data_dir / f"{SEEN_FILE}.lock", LOCK_WAIT_S) as locked:
        if not locked:
            return []
        seen = _seen(seen_path)
        before = seen.get(database)
        if before == store_id:
            return []
        removed = _removed(data_dir, before)
        seen[database] = store_id
        with contextlib.suppress(OSError):
            replace_json(seen_path, seen, indent=1, sort_keys=True)
        return removed


def _removed(data_dir: Path, store_id: object) -> list[Path]:
    """Remove the kept files of ``store_id`` (a store's id, else nothing); what was."""
    if not (isinstance(store_id, str) and _ID_FORM.fullmatch(store_id)):
        return []
    removed: list[Path] = []
    for path in _kept_files(data_dir, store_id):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            with contextlib.suppress(OSError):
                path.unlink()
        else:
            continue
        removed.append(path)
    return removed
