"""bench/scale.py's split of a server's resident file pages: the store's file and its
derived keyword index's files, read from a real ``/proc/<pid>/smaps`` (this process's,
with files of both kinds mapped and read)."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from bench import scale

PAGE = mmap.PAGESIZE


def _mapped_and_read(path: Path, pages: int) -> mmap.mmap:
    path.write_bytes(b"x" * (pages * PAGE))
    with path.open("rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    assert sum(mapped[i * PAGE] for i in range(pages)) == pages * ord("x")  # every page
    return mapped


@pytest.mark.skipif(not Path("/proc/self/smaps").is_file(), reason="needs /proc (Linux)")
def test_the_store_s_and_the_index_s_mapped_pages_are_told_apart(tmp_path: Path):
    (tmp_path / "steno.db.keywords").mkdir()
    maps = [_mapped_and_read(tmp_path / "steno.db", 16),
            _mapped_and_read(tmp_path / "steno.db.keywords" / "a.store", 8),
            _mapped_and_read(tmp_path / "steno.db.keywords" / "b.idx", 4),
            _mapped_and_read(tmp_path / "steno.db-wal", 2),  # neither: not the file
            _mapped_and_read(tmp_path / "other.bin", 2)]
    try:
        split = scale.memory_of(os.getpid(), tmp_path)
        assert split["store"] == 16 * PAGE and split["index"] == 12 * PAGE
        assert split["file"] >= 32 * PAGE and split["peak"] >= split["anon"] > 0
        assert "store" not in scale.memory_of(os.getpid())  # without a data directory
    finally:
        for m in maps:
            m.close()
    assert scale.memory_of(os.getpid(), tmp_path)["store"] == 0  # unmapped
