"""How the framework recipes start the server: its console script, in its own process.

The server does not have to share an environment with the framework (their ``mcp``
versions may differ): point ``STENOGRAPHER_MCP_COMMAND`` at the absolute path that
``stenographer config claude-code`` prints, or let the recipes find
``omega-stenographer-mcp`` on PATH, or fall back to ``uvx omega-stenographer-mcp``.
"""

from __future__ import annotations

import os
import shutil

__all__ = ["DATA_DIR", "SESSION", "server_args", "server_command", "server_env"]

SESSION = "framework-recipe"
DATA_DIR = os.path.abspath(os.environ.get("OMEGA_STENOGRAPHER_DIR")
                           or os.path.expanduser("~/.omega-stenographer"))


def server_command() -> str:
    return (os.environ.get("STENOGRAPHER_MCP_COMMAND")
            or shutil.which("omega-stenographer-mcp") or "uvx")


def server_args() -> list[str]:
    return ["omega-stenographer-mcp"] if server_command() == "uvx" else []


def server_env() -> dict[str, str]:
    # Hosts and adapters pass a reduced environment: give the server its data directory.
    return {"OMEGA_STENOGRAPHER_DIR": DATA_DIR, "PATH": os.environ.get("PATH", "")}
