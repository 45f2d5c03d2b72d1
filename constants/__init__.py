"""Names and forms that the settings check and the layers below use.

The settings validate these values at start-up and the nodes and the store use the
same ones, so they live here, below every layer: this package imports nothing of the
project, and loading the settings loads no node, store or graph code.
"""

import re
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

__all__ = [
    "CAPTURE_KINDS",
    "CLAUDE_CODE",
    "CODEX",
    "DEFAULT_EMBEDDING_URLS",
    "EMBEDDING_PROVIDERS",
    "PEER_URL_FORM",
    "POSTGRES_SCHEMES",
    "EmbeddingConfig",
    "compile_extra",
    "is_postgres_url",
    "peer_url",
]

# The hosts whose transcripts capture reads.
CLAUDE_CODE, CODEX = "claude-code", "codex"
CAPTURE_KINDS = (CLAUDE_CODE, CODEX)

# A shared PostgreSQL database is named by its URL; anything else is the SQLite file.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(url: str | None) -> bool:
    return bool(url) and str(url).startswith(POSTGRES_SCHEMES)


# A sync peer's base URL (the background push target and a sync request's `url`).
_PEER_URL = re.compile(r"https?://[^\s/?#]+(?:/[^\s?#]*)?", re.IGNORECASE)
PEER_URL_FORM = "http(s)://host:port, e.g. http://127.0.0.1:8765"


def peer_url(raw: str) -> str | None:
    """A peer's base URL without a trailing slash, or None when it is not one."""
    url = raw.strip().rstrip("/")
    return url if _PEER_URL.fullmatch(url) else None


def compile_extra(sources: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    """Compile extra secret regexes (group 1, if any, is the part to replace).

    Raises ``ValueError`` naming the pattern when one does not compile or matches the
    empty string (it would redact nothing but cost a scan of every turn).
    """
    compiled = []
    for source in sources:
        try:
            pattern = re.compile(source)
        except re.error as exc:
            raise ValueError(f"invalid secret pattern {source!r}: {exc}; expected a Python "
                             "`re` regex") from exc
        if pattern.search("") is not None:
            raise ValueError(f"invalid secret pattern {source!r}: it matches the empty "
                             r"string; anchor it to a literal, e.g. acme_[0-9a-f]{32}")
        compiled.append(pattern)
    return tuple(compiled)


# --- the optional embedding provider ---------------------------------------------------------

Provider = Literal["openai", "ollama"]
EMBEDDING_PROVIDERS: tuple[Provider, ...] = ("openai", "ollama")
DEFAULT_EMBEDDING_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1/embeddings",  # any OpenAI-compatible /v1/embeddings
    "ollama": "http://127.0.0.1:11434/api/embed",
}
EMBEDDING_URL_FORM = r"https?://[^\s/?#]+(?:/[^\s]*)?"


class EmbeddingConfig(BaseModel):
    """An OpenAI-compatible (``POST /v1/embeddings``) or Ollama (``POST /api/embed``)
    endpoint. ``dim`` None: the dimension of the first answer, enforced after that.
    The ranges are the ones the settings accept from the environment."""

    model_config = ConfigDict(frozen=True)

    provider: Provider
    url: Annotated[str, Field(pattern=f"(?i)^{EMBEDDING_URL_FORM}$")]
    model: Annotated[str, Field(min_length=1)]
    dim: int | None = Field(default=None, ge=0, le=65_536)  # 0: as None
    api_key: SecretStr | None = None
    timeout_s: Annotated[float, Field(ge=0.05, le=600.0)] = 10.0
    batch: Annotated[int, Field(ge=1, le=2_048)] = 32
    retries: Annotated[int, Field(ge=0, le=10)] = 2
    # Of the provider's list in the fused ranking (the keyword list weighs 1.0).
    weight: Annotated[float, Field(ge=0.0, le=100.0)] = 1.0

    @field_validator("dim")
    @classmethod
    def _first_answer(cls, dim: int | None) -> int | None:
        return dim or None

    @property
    def key(self) -> str:
        """Names this model's vectors in the store: a different model, other vectors."""
        return f"{self.provider}:{self.model}" + (f":{self.dim}" if self.dim else "")
