"""Hashed vectors on PostgreSQL: pgvector's ``halfvec`` and its text form.

Here the database answers for the hashed vectors, not an in-memory copy
(``store.vectors``): several processes write and a turn with a smaller id can commit
after one with a larger id, so a copy that reads "the rows after the last id it has"
would miss rows. Within a session the session's vectors are scanned (exact, as the
copy is); across sessions the HNSW index is searched, with ``hnsw.ef_search`` at least
the number of neighbours asked for. (The provider's vectors keep the copy on both
backends; see ``store.provider_vectors``.)
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from store.errors import StoreError
from store.sql import Conn, all_rows
from store.vectors import Block, VectorCache

__all__ = ["PgVectorCache", "int8_blob", "query_text", "vector_text"]


def vector_text(blob: bytes) -> str:
    """An int8 vector blob in pgvector's text form, ``[1,-2,...]``."""
    return "[" + ",".join(map(str, np.frombuffer(blob, dtype=np.int8).tolist())) + "]"


def query_text(query: npt.NDArray[np.float32]) -> str:
    """A query vector in pgvector's text form."""
    return "[" + ",".join(f"{x:.6g}" for x in query.tolist()) + "]"


def int8_blob(text: str) -> bytes:
    """pgvector's text form of a halfvec of whole numbers, as the int8 blob SQLite keeps."""
    values = np.array(text.strip("[]").split(","), dtype=np.float32)
    return bytes(np.rint(values).astype(np.int8).tobytes())


# Stored components are the int8 values (store.postgres.schema), so the inner product is
# divided by 127 as the in-memory copy divides the components.
KNN_SESSION = """
WITH s AS MATERIALIZED (SELECT rowid, embedding FROM exchange_vectors WHERE session_id = ?)
SELECT rowid, -(embedding <#> ?::halfvec) / 127.0 AS score FROM s
ORDER BY score DESC, rowid LIMIT ?"""
KNN_ALL = """
SELECT rowid, -(embedding <#> ?1::halfvec) / 127.0 FROM exchange_vectors
ORDER BY embedding <#> ?1::halfvec LIMIT ?2"""
SET_EF_SEARCH = "SELECT set_config('hnsw.ef_search', ?, true)"
EF_SEARCH_MIN, EF_SEARCH_MAX = 40, 1000  # pgvector's default and its largest


class PgVectorCache(VectorCache):
    """The hashed vectors of every turn, searched by pgvector (module docstring); no
    copy is kept."""

    def everything(self, conn: Conn) -> Block | None:
        return None

    def knn(
        self,
        conn: Conn,
        query: npt.NDArray[np.float32],
        k: int,
        session_id: int | None = None,
    ) -> list[tuple[int, float]]:
        """As ``MatrixCache.knn``, answered by the database."""
        if len(query) != self.dim:
            raise StoreError(f"a {len(query)}-component query against {self.dim}-component "
                             "stored vectors")
        if session_id is not None:
            found = all_rows(conn, KNN_SESSION, (session_id, query_text(query), k))
        else:
            ef_search = min(max(k, EF_SEARCH_MIN), EF_SEARCH_MAX)
            all_rows(conn, SET_EF_SEARCH, (str(ef_search),))
            found = all_rows(conn, KNN_ALL, (query_text(query), k))
        return [(int(i), float(s)) for i, s in found if float(s) > 0.0]
