"""What every command module shares: exit codes, the epilog, the usage error, JSON
output and running one graph.

``stenographer/cli.py`` builds the parser from the command modules (``sync_cli``,
``graphrag_cli``, ...); they take these pieces from here, so no command module imports
the one that imports it. Kept light: the host hook imports it before anything else.
"""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["EPILOG", "EXIT_EMPTY", "EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "CliError",
           "print_json", "run_graph", "stdout_tty"]

EXIT_OK, EXIT_EMPTY, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130

EPILOG = """\
exit codes:
  0  success
  1  nothing found (no hits, an unknown or empty session, no runs, nothing to
     forget), or (audit, migrate) contract violations
  2  bad input, an unknown session or run id, a store that cannot be used,
     (doctor) a failed check, or (migrate) a refused target

environment: OMEGA_STENOGRAPHER_DIR (data directory, default ~/.omega-stenographer),
STENO_* settings (see docs/settings.md). `stenographer doctor` checks the set-up.
"""


class CliError(Exception):
    """Bad use of a command that argparse cannot express (exit 2)."""

    code = "steno.usage"


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def stdout_tty() -> bool:
    return sys.stdout.isatty()


def run_graph(graph: str, request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Open the application and run one graph; a spinner on a terminal after 1 s."""
    from stenographer.progress import Progress

    with Progress(f"stenographer {graph}"):
        from stenographer.app import open_app

        app = open_app()
        try:
            return app.run(graph, request)
        finally:
            app.close()
