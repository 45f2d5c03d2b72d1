"""Command-line tests: `python -m stenographer ...` as a subprocess on a real store.

A store is seeded once per session in this process (the ingest graph through
``stenographer.app.open_app``), closed, then read by the subprocesses. Every subprocess
gets a minimal environment (like a host's) plus PYTHONPATH=repo root, and a timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stenographer.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120.0  # seconds per command; generous for a loaded machine, never infinite

ALPHA, BETA = "alpha-deploy", "beta-billing"
ALPHA_TURNS = [
    ("user", "The deploy pipeline takes forty minutes. Can we make it faster?"),
    ("assistant", "Most of the time goes to building the Docker image without a cache."),
    ("assistant", "Decision: we enable BuildKit layer caching in the deploy pipeline."),
    ("tool", "docker build: 41m12s (no cache)"),
    ("assistant", "Blocked: the CI runners have no persistent disk for the cache."),
    ("user", "Use the registry as the cache backend then."),
    ("assistant", "We went with registry-backed caching; the build is down to 6 minutes."),
    ("tool", "docker build: 6m03s (cache hit 94%)"),
    ("assistant", "The flaky integration test is unrelated to the cache change."),
    ("user", "Good. Ship it."),
]
BETA_TURNS = [
    ("user", "Annual invoices show the monthly price."),
    ("assistant", "Decision: the invoice amount comes from the billing period."),
]


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(data_dir.parent),
           "PYTHONPATH": str(REPO_ROOT), "OMEGA_STENOGRAPHER_DIR": str(data_dir)}
    env.update(extra)
    return env


def run_cli(data_dir: Path, *args: str, **extra_env: str) -> Result:
    proc = subprocess.run(
        [sys.executable, "-m", "stenographer", *args], cwd=REPO_ROOT,
        env=cli_env(data_dir, **extra_env), capture_output=True, text=True,
        encoding="utf-8", timeout=TIMEOUT, check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def seed(data_dir: Path) -> dict[str, Any]:
    """Record two sessions (the first long enough to be compressed) and one milestone."""
    from stenographer.app import open_app

    app = open_app(Settings(data_dir=data_dir))
    ids: list[int] = []
    try:
        for n, (role, content) in enumerate(ALPHA_TURNS):
            out, _ = app.run("ingest", {"role": role, "content": content, "session_id": ALPHA,
                                        "created_at": f"2026-01-01T10:{n:02d}:00Z"})
            ids.append(out["reply"]["exchange_id"])
        for n, (role, content) in enumerate(BETA_TURNS):
            app.run("ingest", {"role": role, "content": content, "session_id": BETA,
                               "created_at": f"2026-01-02T09:{n:02d}:00Z"})
        app.run("milestone", {"session_id": ALPHA, "exchange_id": ids[-1],
                              "label": "pipeline shipped"})
    finally:
        app.close()
    return {"alpha_ids": ids}


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp("seeded") / "data"
    seed(data_dir)
    yield data_dir


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    """A data directory that does not exist yet (created owner-only on first use)."""
    return tmp_path / "data"
