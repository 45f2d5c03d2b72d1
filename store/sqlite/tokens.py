"""FTS5's own tokenizer, outside any table: the words, stems and folding of
``exchanges_fts`` (``store.search_filter.FTS_TOKENIZE``), for code that must see a text
as the index does (the derived keyword index, the index's word counts)."""

from __future__ import annotations

import functools
import threading
from typing import Any

import apsw

from store.search_filter import FTS_TOKENIZE

__all__ = ["fts_words"]


@functools.cache
def _tokenizer() -> Any:
    name, *args = FTS_TOKENIZE.split()
    return apsw.Connection(":memory:").fts5_tokenizer(name, args)


_tokenizer_lock = threading.Lock()


def fts_words(text: str, flags: int = apsw.FTS5_TOKENIZE_DOCUMENT) -> list[str]:
    """``text`` as FTS5 tokenizes it for the index (``flags``: for a query, the
    tokenizer's query flags)."""
    tokenize = _tokenizer()
    with _tokenizer_lock:  # a list of str already (apsw): not copied
        tokens = tokenize(text.encode("utf-8"), flags, None,
                          include_offsets=False, include_colocated=False)
    return tokens  # type: ignore[no-any-return]  # str tokens without offsets
