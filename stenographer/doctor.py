"""`stenographer doctor`: check that this machine can run the server, say how to fix what
cannot.

One run of the ``doctor`` graph (graphs/doctor; the checks are its stages, in
nodes/evaluate_contracts/setup_checks.py). It must work exactly when the application
cannot be opened, so it runs without a run context (no store, no settings object): the
settings are read here, at the edge, and the graph is told where the data lives or why
the settings are invalid; its trace is returned, not stored. Nothing is created or
migrated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from nodes.evaluate_contracts.setup_checks import PG_CHECKS, Check
from nodes.publish.wording import counted
from stenographer.settings import Settings, SettingsError

__all__ = ["CHECK_COUNT", "as_json", "check_count", "report", "run_doctor"]

CHECK_COUNT = 9  # for the progress bar


def check_count(env: Mapping[str, str] | None = None) -> int:
    """How many checks ``run_doctor`` makes with these settings (for a progress bar)."""
    try:
        postgres = Settings.from_env(env).database_url is not None
    except SettingsError:
        postgres = False
    return CHECK_COUNT - 2 + len(PG_CHECKS) if postgres else CHECK_COUNT


def run_doctor(env: Mapping[str, str] | None = None,
               on_check: Callable[[Check], None] | None = None
               ) -> tuple[list[Check], dict[str, Any]]:
    """Every check, and the run's stage trace; ``on_check`` is called after each
    (progress)."""
    from graphs.registry import build_graphs
    from graphs.runner import Observer

    request: dict[str, Any]
    try:
        settings = Settings.from_env(env)
        request = {"data_dir": str(settings.data_dir), "database_url": settings.database_url}
    except SettingsError as ex:
        request = {"invalid": str(ex)}

    observe: Observer | None = None
    if on_check is not None:
        checked = on_check

        def observe(_stage: dict[str, Any], writes: dict[str, Any]) -> None:
            for check in writes.get("checks", ()):
                checked(check)

    out, trace = build_graphs().run("doctor", {"request": request}, None, observe)
    checks: list[Check] = out["reply"]["checks"]
    return checks, trace


def report(checks: list[Check], color: bool = False) -> str:
    """✓/✗ lines, each failure followed by how to fix it."""
    green, red, reset = ("\x1b[32m", "\x1b[31m", "\x1b[0m") if color else ("", "", "")
    lines = []
    for c in checks:
        mark = f"{green}✓{reset}" if c.ok else f"{red}✗{reset}"
        lines.append(f"{mark} {c.name}: {c.detail}")
        if not c.ok and c.fix:
            lines.append(f"    fix: {c.fix}")
    failed = sum(not c.ok for c in checks)
    lines.append("All checks passed." if not failed else
                 f"{failed} of {counted(len(checks), 'check')} failed.")
    return "\n".join(lines)


def as_json(checks: list[Check]) -> dict[str, Any]:
    return {"ok": all(c.ok for c in checks), "checks": [asdict(c) for c in checks]}
