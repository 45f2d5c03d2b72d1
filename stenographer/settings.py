"""Settings: one frozen object built once from the environment, at the edge.

Nothing else in the project reads ``os.environ``. The graphs and nodes receive the
values they need through the run context (``RunContext.settings``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "DEFAULT_DATA_DIR",
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MAX_CONTENT_CHARS",
    "DEFAULT_TOP_K",
    "DEFAULT_TRACE_RETENTION",
    "DEFAULT_TURN_LIMIT",
    "DEFAULT_VECTOR_DIM",
    "Settings",
    "SettingsError",
]

DEFAULT_DATA_DIR = Path("~/.omega-stenographer")
DEFAULT_TURN_LIMIT = 8
DEFAULT_TOP_K = 5
DEFAULT_MAX_CHARS = 8_000  # reply budget of the read tools
DEFAULT_MAX_CONTENT_CHARS = 1_000_000  # one turn; 1 MB single-line turns are accepted
DEFAULT_TRACE_RETENTION = 2_000  # stage traces kept in the store
DEFAULT_VECTOR_DIM = 256
DEFAULT_SYNCHRONOUS = "normal"  # WAL + NORMAL survives process crashes; FULL survives power loss
DEFAULT_GRAPH_WORKERS = 1


class SettingsError(ValueError):
    """An environment variable holds a value that is not valid."""


def _int(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a whole number ({low}..{high})") from None
    if not low <= value <= high:
        raise SettingsError(f"{name}={value} is out of range ({low}..{high})")
    return value


@dataclass(frozen=True)
class Settings:
    data_dir: Path = field(default_factory=lambda: DEFAULT_DATA_DIR.expanduser())
    turn_limit: int = DEFAULT_TURN_LIMIT
    top_k: int = DEFAULT_TOP_K
    max_chars: int = DEFAULT_MAX_CHARS
    max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS
    trace_retention: int = DEFAULT_TRACE_RETENTION
    vector_dim: int = DEFAULT_VECTOR_DIM
    synchronous: str = DEFAULT_SYNCHRONOUS
    decision_patterns: tuple[str, ...] = ()
    blocker_patterns: tuple[str, ...] = ()

    @property
    def db_path(self) -> Path:
        return self.data_dir / "steno.db"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        data_dir = env.get("OMEGA_STENOGRAPHER_DIR") or str(DEFAULT_DATA_DIR)
        sync = env.get("STENO_SYNCHRONOUS", DEFAULT_SYNCHRONOUS).strip().lower()
        if sync not in ("normal", "full"):
            raise SettingsError(f"STENO_SYNCHRONOUS={sync!r} is not valid (normal, full)")
        return cls(
            data_dir=Path(data_dir).expanduser().resolve(),
            turn_limit=_int(env, "STENO_TURN_LIMIT", DEFAULT_TURN_LIMIT, 2, 1_000),
            top_k=_int(env, "STENO_TOP_K", DEFAULT_TOP_K, 1, 50),
            max_chars=_int(env, "STENO_MAX_CHARS", DEFAULT_MAX_CHARS, 500, 200_000),
            max_content_chars=_int(
                env, "STENO_MAX_CONTENT_CHARS", DEFAULT_MAX_CONTENT_CHARS, 100, 10_000_000
            ),
            trace_retention=_int(
                env, "STENO_TRACE_RETENTION", DEFAULT_TRACE_RETENTION, 10, 1_000_000
            ),
            synchronous=sync,
            decision_patterns=_patterns(env.get("STENO_DECISION_PATTERNS")),
            blocker_patterns=_patterns(env.get("STENO_BLOCKER_PATTERNS")),
        )


def _patterns(raw: str | None) -> tuple[str, ...]:
    """Extra extraction regexes, one per line (a regex may itself contain `|`)."""
    if not raw:
        return ()
    return tuple(line.strip() for line in raw.splitlines() if line.strip())
