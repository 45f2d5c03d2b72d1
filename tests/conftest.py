"""Shared test set-up: the repository root on ``sys.path`` and the anyio backend."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    # Session scope so that module-scoped async fixtures (shared stdio servers) can use it.
    return "asyncio"
